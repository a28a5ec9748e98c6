"""Downstreams that misbehave: junk on stdout, a flood of it, failing to start in the ways people meet
(an exit, a refused connection, silence), and hanging at start while the others are ready."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TextIO

import mcp_types as types
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

from tests.e2e.conftest import BIN, free_port
from tests.server.surface import rows, serving, text

ODD = str(Path(__file__).with_name("odd_server.py"))


def odd(start: str = "") -> dict[str, Any]:
    return {"command": sys.executable, "args": [ODD], "env": {"ODD_START": start}}


@asynccontextmanager
async def toolwise_logging_to(config: Path, log: TextIO, message_handler: Any = None) -> AsyncIterator[Client]:
    params = StdioServerParameters(command=str(BIN / "toolwise"), args=["serve", "-c", str(config)])
    async with Client(stdio_client(params, errlog=log), mode="legacy", message_handler=message_handler) as client:
        yield client


async def health(client: Client) -> dict[str, dict[str, Any]]:
    stats = (await client.call_tool("get_learning_stats", {})).structured_content
    return {d["server"]: d for d in stats["downstreams"]}


async def test_junk_on_stdout_neither_restarts_a_downstream_nor_floods_the_log(
    write_config: Callable[..., Path], tmp_path: Path
) -> None:
    log = tmp_path / "toolwise.log"
    with log.open("w") as errlog:
        async with toolwise_logging_to(write_config({"odd": odd()}), errlog) as client:
            assert not (await client.call_tool("odd__junk", {"n": 1})).is_error
            assert text(await client.call_tool("odd__ping", {})) == "pong"
            assert not (await client.call_tool("odd__junk", {"n": 2000})).is_error
            assert text(await client.call_tool("odd__ping", {})) == "pong"
            [odd_health] = (await health(client)).values()
    assert odd_health["state"] == "ready" and odd_health["restarts"] == 0 and odd_health["junk_lines"] == 2001
    logged = log.read_text()
    assert "Traceback" not in logged and "Failed to parse JSONRPC" not in logged
    junk_lines = [line for line in logged.splitlines() if "not JSON-RPC" in line]
    assert 1 <= len(junk_lines) <= 2, junk_lines  # the first line; the rest summed up in one more at shutdown
    assert "2000 more lines" in junk_lines[-1] and "restart" not in logged


async def test_what_a_downstream_says_on_stderr_is_named_for_it_with_its_secrets_masked(
    write_config: Callable[..., Path], tmp_path: Path
) -> None:
    """Several downstreams write to one log (a client keeps it: Claude Desktop's mcp-server-toolwise.log): their
    lines came through unnamed and whole, the key a server was given (from the config's env) and a token with it."""
    key, token = "plain" + "K" * 20, "ghp_" + "a" * 36
    servers = {
        "weather": {
            **odd(),
            "env": {
                "ODD_START": "",
                "WEATHER_API_KEY": key,
                "ODD_SAY": f"using key {{WEATHER_API_KEY}}, git token {token}",
            },
        },
        "quiet": odd(),
    }
    log = tmp_path / "toolwise.log"
    with log.open("w") as errlog:
        async with toolwise_logging_to(write_config(servers), errlog) as client:
            assert text(await client.call_tool("weather__ping", {})) == "pong"
    logged = log.read_text()
    assert key not in logged and token not in logged, logged
    [said] = [line for line in logged.splitlines() if "using key" in line]
    assert said == "[weather] using key ***, git token ***", said


async def test_a_key_a_downstream_was_given_in_its_args_is_masked_in_what_it_says(
    write_config: Callable[..., Path], tmp_path: Path
) -> None:
    """A key passed on the command line (`--api-key KEY`, `--token=KEY`: many servers' READMEs do so) is the
    server's secret as much as one in its env: a server that echoes its arguments on stderr had it logged whole."""
    key, token = "plain" + "K" * 20, "plain" + "T" * 20
    servers = {
        "weather": {
            "command": sys.executable,
            "args": [ODD, "--api-key", key, f"--token={token}"],
            "env": {"ODD_START": "", "ODD_SAY": f"started with --api-key {key} --token={token}"},
        }
    }
    log = tmp_path / "toolwise.log"
    with log.open("w") as errlog:
        async with toolwise_logging_to(write_config(servers), errlog) as client:
            assert text(await client.call_tool("weather__ping", {})) == "pong"
    logged = log.read_text()
    [said] = [line for line in logged.splitlines() if "started with" in line]
    assert said == "[weather] started with --api-key *** --token=***", said


async def test_failure_reasons_say_what_happened(write_config: Callable[..., Path], tmp_path: Path) -> None:
    flag = tmp_path / "hang"
    flag.touch()
    servers = {
        "exits": odd("exit:3"),
        "silent": odd(f"wait:{flag}"),
        "refused": {"url": f"http://127.0.0.1:{free_port()}/mcp"},
        "missing": {"command": "toolwise-no-such-server"},
    }
    config = write_config(servers, start_timeout_s=3, start_wait_s=30, restart_backoff_s=30)
    with (tmp_path / "toolwise.log").open("w") as errlog:
        async with toolwise_logging_to(config, errlog) as client:
            reasons = {name: h["error"] for name, h in (await health(client)).items()}
    assert reasons == {
        "exits": "command exited with status 3",
        "silent": "no answer to initialize within 3s (start_timeout_s)",
        "refused": "connection refused",
        "missing": "command not found: toolwise-no-such-server",
    }


async def test_a_downstream_that_hangs_at_start_delays_no_connection_and_a_first_list_waits_for_it(
    write_config: Callable[..., Path], tmp_path: Path
) -> None:
    flag = tmp_path / "hang"
    flag.touch()
    config = write_config({"slow": odd(f"wait:{flag}")}, start_timeout_s=120, start_wait_s=0.5)
    heard = asyncio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            heard.set()

    with (tmp_path / "toolwise.log").open("w") as errlog:
        async with asyncio.timeout(20):  # far below start_timeout_s: it did not wait for the hanging one
            async with toolwise_logging_to(config, errlog, on_message) as client:
                # Serving without it; a tools/list waits for it (not every client refreshes on list_changed).
                asyncio.get_running_loop().call_later(1, flag.unlink)  # then it answers
                names = {t.name for t in (await client.list_tools()).tools}
                assert not flag.exists()  # the list came once it had answered
                assert "recommend_tool" in names and "slow__ping" in names
                await heard.wait()
                assert text(await client.call_tool("slow__ping", {})) == "pong"


async def test_a_result_the_protocol_does_not_allow_is_one_line_naming_what_is_wrong(tmp_path: Path) -> None:
    """A downstream written without the SDK answers content of a type MCP does not define, a result without
    content, structured content that breaks its output schema: each call fails naming what is wrong in one line,
    in the client's result and the log (they were pydantic's 13 validation errors, 40 lines with their URLs,
    and jsonschema's indented dump)."""
    raw = {"raw": {"command": sys.executable, "args": [str(Path(__file__).with_name("raw_server.py"))]}}
    async with serving(tmp_path, raw, in_process={}, start_wait_s=20) as client:
        answers = {n: await client.call_tool(f"raw__{n}", {}) for n in ("hologram", "nocontent", "bad_structured")}
        fine = await client.call_tool("raw__ok", {})
    said = {n: text(a) for n, a in answers.items() if a.is_error}
    prefix = "'raw' answered the call to '{}' with a result that breaks its schema: "
    assert said == {
        "hologram": prefix.format("hologram")
        + "content[1] has type 'hologram', which MCP does not define (text, image, audio, resource_link, resource)",
        "nocontent": prefix.format("nocontent") + "content: Field required",
        "bad_structured": prefix.format("bad_structured") + "structuredContent.n: 'many' is not of type 'integer'",
    }
    assert text(fine) == "fine"
    logged = rows(tmp_path, "SELECT tool, error_type, error_message FROM executions WHERE NOT success ORDER BY seq")
    assert logged == [(f"raw__{n}", "InvalidResultError", said[n]) for n in said]
