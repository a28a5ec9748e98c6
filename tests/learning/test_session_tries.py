"""What a session's own calls say of a request (`Session.tried_for`, read by rl/fit.py's `tried_unfit`): the
different tools it tried for that very request and that failed for their fit; a call that worked for it, or
a failure that is the downstream's health or refused arguments, says nothing against the tools."""

from __future__ import annotations

from toolwise.downstream.errors import DownstreamError, InvalidArgumentsError
from toolwise.feedback import Execution, utcnow
from toolwise.learning.sessions import Session

QUERY = "Set an alarm for 7am"


def call(tool: str, success: bool, query: str = QUERY, error_type: str | None = "ToolError") -> Execution:
    now = utcnow()
    return Execution(
        tool, "s", "session", success, 10.0, now, now, query=query, error_type=None if success else error_type
    )


def session(*calls: Execution) -> Session:
    s = Session("session")
    for c in calls:
        s.add(c)
    return s


def test_the_different_tools_that_failed_for_the_request_are_its_tries() -> None:
    tried = session(call("c", False, query="something else"), call("a", False), call("a", False), call("b", False))
    assert tried.tried_for("  set an ALARM for 7am ") == ("a", "b")


def test_a_call_for_another_request_ends_the_run_of_tries() -> None:
    assert session(call("a", False), call("c", True, query="something else"), call("b", False)).tried_for(QUERY) == (
        "b",
    )


def test_a_call_that_worked_for_the_request_leaves_no_tries() -> None:
    assert session(call("a", False), call("b", True), call("c", False)).tried_for(QUERY) == ()


def test_the_downstream_s_health_and_refused_arguments_say_nothing_of_the_tools() -> None:
    tried = session(
        call("a", False, error_type=DownstreamError.__name__),
        call("b", False, error_type=InvalidArgumentsError.__name__),
        call("c", False),
    )
    assert tried.tried_for(QUERY) == ("c",)
