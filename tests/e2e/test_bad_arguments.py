"""One client's bad arguments are its own problem: refused before forwarding when they break the
tool's input schema, and never counted against the downstream (circuit) or the tool (shields)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.e2e.conftest import rows, toolwise
from tests.server.surface import text

HERE = Path(__file__).parent
PICKY = {"picky": {"command": sys.executable, "args": [str(HERE / "picky_server.py")]}}


async def stats(client: Any) -> dict[str, Any]:
    return dict((await client.call_tool("get_learning_stats", {})).structured_content)


async def test_arguments_that_break_the_schema_are_refused_before_the_downstream_sees_them(
    write_config: Callable[..., Path], tmp_path: Path
) -> None:
    async with toolwise(write_config(PICKY)) as client:
        missing = await client.call_tool("picky__strict", {})
        wrong = await client.call_tool("picky__strict", {"n": "three"})
        good = await client.call_tool("picky__strict", {"n": 3})
        seen = await client.call_tool("picky__seen", {})
    assert missing.is_error and "'n' is a required property" in text(missing)
    assert wrong.is_error and "argument 'n': 'three' is not of type 'integer'" in text(wrong)
    assert not good.is_error
    assert text(seen) == "1"  # only the good call reached the downstream
    assert rows(tmp_path / "toolwise.db", "SELECT tool, error_type FROM executions ORDER BY seq") == [
        ("picky__strict", "InvalidArgumentsError"),  # recorded as the caller's fault
        ("picky__strict", "InvalidArgumentsError"),
        ("picky__strict", None),
        ("picky__seen", None),
    ]


async def test_invalid_params_answers_open_no_circuit_and_shield_no_tool(write_config: Callable[..., Path]) -> None:
    config = write_config(PICKY, circuit_failures=5, shield_min_calls=5)
    async with toolwise(config) as client:
        for _ in range(8):
            refused = await client.call_tool("picky__picky", {"nope": 1})
            assert refused.is_error and "refused the arguments" in text(refused)
        assert not (await client.call_tool("picky__picky", {"ok": True})).is_error  # not "circuit is open"
        after = await stats(client)
    assert after["open_circuits"] == [] and after["downstreams"][0]["circuit"] == "closed"
    assert after["shielded_tools"] == {}
