"""A small log for the dashboard's tests: tools called in sessions, some after a recommendation, an
ended session, and an instance that reports a downstream with an open circuit and a drift."""

from __future__ import annotations

from datetime import timedelta

from toolwise.feedback import Execution, FeedbackService, utcnow
from toolwise.feedback.records import Episode, InstanceStatus

# tool: (calls, successes, latency ms); calls differ so that each sort order differs from the others
TOOLS = {
    "time__get_current_time": (9, 9, 20.0),
    "git__git_status": (6, 5, 80.0),
    "search__web_search": (4, 1, 900.0),
    "alpha__zeta_tool": (2, 2, 5.0),
}
DRIFT = "search__web_search: rewards fell at call 120 (8.00 → -2.00)"


async def fill(url: str, namespace: str = "default") -> None:
    """The log above in `namespace` of the database at `url`."""
    now = utcnow()
    calls = [(tool, i < ok, ms) for tool, (n, ok, ms) in TOOLS.items() for i in range(n)]
    async with FeedbackService(url) as feedback:
        for i, (tool, success, ms) in enumerate(calls):
            session = f"session-{i // 4}"
            finished = now - timedelta(minutes=len(calls) - i)
            recommended = i % 2 == 0
            await feedback.log.record_execution(
                Execution(
                    tool=tool,
                    server=tool.split("__")[0],
                    session_id=session,
                    namespace=namespace,
                    success=success,
                    latency_ms=ms,
                    started_at=finished - timedelta(milliseconds=ms),
                    finished_at=finished,
                    position=i % 4,
                    decision_id=f"d{i}" if recommended else None,
                    propensity=0.9 if recommended and i % 4 == 0 else None,  # the recommended tool called
                    explored=False if recommended and i % 4 == 0 else None,
                    reward=10.0 if success else -5.0,
                    error_type=None if success else "ToolError",
                )
            )
        await feedback.flush()
        ended = [t for t, _, _ in calls[:4]]
        await feedback.log.record_episode(
            Episode("session-0", ended, 40.0, "success", now - timedelta(hours=1), now, namespace)
        )
        await feedback.instances.heartbeat(
            InstanceStatus(
                id=f"instance-under-test-{namespace}",
                namespace=namespace,
                host="testhost",
                pid=4242,
                started_at=now - timedelta(hours=1),
                heartbeat_at=now,
                status={
                    "policy": "semantic",
                    "serving": "serving",
                    "downstreams": [
                        {
                            "server": "time",
                            "state": "ready",
                            "tools": 2,
                            "restarts": 0,
                            "error": None,
                            "circuit": "closed",
                        },
                        {
                            "server": "search",
                            "state": "ready",
                            "tools": 1,
                            "restarts": 3,
                            "error": None,
                            "circuit": "open",
                        },
                    ],
                    "open_circuits": ["search"],
                    "calls": len(calls),
                    "epsilon": 0.05,
                    "epsilon_reason": "rewards fell: exploring more",
                    "drifts": [DRIFT],
                    "store": "ok",
                },
            )
        )
        await feedback.flush()
