"""`@modelcontextprotocol/server-everything` direct and behind toolwise, through the SDK client in
both protocol eras: every feature of issue 14's table is observed both ways and compared."""

from __future__ import annotations

import asyncio
import json
import warnings
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.shared.exceptions import MCPDeprecationWarning
from pydantic import FileUrl

from tests.e2e.conftest import BIN
from tests.e2e.node import EVERYTHING, node_for

ROOT_URI = "file:///tmp/toolwise-roots"


class Observer:
    """The client side of one run: callbacks that answer and notes of what arrived."""

    def __init__(self) -> None:
        self.logs: list[types.LoggingMessageNotificationParams] = []
        self.updated: list[str] = []
        self.asked: list[str] = []

    async def on_log(self, params: types.LoggingMessageNotificationParams) -> None:
        self.logs.append(params)

    async def on_message(self, message: Any) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            self.updated.append(message.params.uri)

    async def sampling(self, context: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        self.asked.append("sampling")
        return types.CreateMessageResult(role="assistant", content=types.TextContent(text="sampled!"), model="m")

    async def elicitation(self, context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        self.asked.append("elicitation")
        return types.ElicitResult(action="decline")

    async def roots(self, context: Any) -> types.ListRootsResult:
        self.asked.append("roots")
        return types.ListRootsResult(roots=[types.Root(uri=FileUrl(ROOT_URI), name="roots")])


@asynccontextmanager
async def connect(params: StdioServerParameters, mode: str, seen: Observer) -> AsyncIterator[Client]:
    async with Client(
        params,
        mode=mode,
        read_timeout_seconds=60,
        logging_callback=seen.on_log,
        message_handler=seen.on_message,
        sampling_callback=seen.sampling,
        elicitation_callback=seen.elicitation,
        list_roots_callback=seen.roots,
        log_level="debug",
    ) as client:
        yield client


def texts(blocks: Any) -> list[str]:
    return [b.text for b in blocks if isinstance(b, types.TextContent)]


async def observe(
    client: Client, seen: Observer, tool: Callable[[str], str], prompt: Callable[[str], str]
) -> dict[str, Any]:
    """What a user of server-everything notices, feature by feature (names without the prefix)."""
    got: dict[str, Any] = {}
    resources = (await client.list_resources()).resources
    got["resources"] = sorted(r.uri for r in resources)
    got["templates"] = sorted(t.uri_template for t in (await client.list_resource_templates()).resource_templates)
    first = sorted(resources, key=lambda r: r.uri)[0].uri
    got["read"] = [c.model_dump(exclude_none=True) for c in (await client.read_resource(first)).contents]
    templated = (await client.read_resource("demo://resource/dynamic/text/7")).contents
    got["read_templated"] = [(c.uri, c.text.split(" created at ")[0]) for c in templated]  # type: ignore[union-attr]
    prompts = (await client.list_prompts()).prompts
    got["prompts"] = sorted(p.name.removeprefix(prompt("")) for p in prompts)
    got["prompt_get"] = (await client.get_prompt(prompt("args-prompt"), {"city": "Paris"})).model_dump(
        exclude={"meta"}, exclude_none=True
    )
    ref = types.PromptReference(name=prompt("completable-prompt"))
    got["complete"] = (await client.complete(ref, {"name": "department", "value": "E"})).completion.values
    tools = {t.name for t in (await client.list_tools()).tools}
    got["gated_tools"] = sorted(t for t in map(tool, ["get-roots-list", "trigger-sampling-request"]) if t in tools)
    # logging and progress: messages and progress notifications arrive during a long call
    if client.protocol_version.startswith("2025"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            await client.set_logging_level("debug")
    await client.call_tool(tool("toggle-simulated-logging"), {})
    reported: list[float] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        reported.append(progress)

    slow = {"duration": 6, "steps": 4}
    long = await client.call_tool(tool("trigger-long-running-operation"), slow, None, on_progress)
    await client.call_tool(tool("toggle-simulated-logging"), {})
    got["long_call"] = texts(long.content)
    got["progress"] = reported
    got["logs_during_calls"] = len(seen.logs) >= 2
    got["log_loggers"] = sorted({p.logger or "" for p in seen.logs})
    # the downstream's own requests: answered by this client's callbacks
    sampled = await client.call_tool(tool("trigger-sampling-request"), {"prompt": "hello"})
    got["sampling"] = "sampled!" in " ".join(texts(sampled.content))
    roots = await client.call_tool(tool("get-roots-list"), {})
    got["roots"] = ROOT_URI in " ".join(texts(roots.content))
    got["asked"] = sorted(set(seen.asked))
    got["updated"] = await updates(client, seen, first, tool("toggle-subscriber-updates"))
    return got


async def updates(client: Client, seen: Observer, uri: str, toggle: str) -> list[str]:
    """The resource updates a subscription to `uri` brings (resources/subscribe on 2025-11-25, a
    subscriptions/listen stream on 2026-07-28)."""
    if client.protocol_version.startswith("2025"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            await client.subscribe_resource(uri)
            await client.call_tool(toggle, {})
            for _ in range(80):
                if seen.updated:
                    break
                await asyncio.sleep(0.1)
            await client.unsubscribe_resource(uri)
        await client.call_tool(toggle, {})
        return sorted(set(seen.updated))
    async with client.listen(resource_subscriptions=[uri]) as subscription:
        await client.call_tool(toggle, {})
        with anyio.fail_after(8):
            event = await anext(aiter(subscription))
    await client.call_tool(toggle, {})
    return [event.uri]  # type: ignore[union-attr]


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_server_everything_behind_toolwise_offers_what_it_offers_direct(tmp_path: Path, mode: str) -> None:
    node = node_for(EVERYTHING)
    direct = StdioServerParameters(command=node, args=[str(EVERYTHING), "stdio"])
    config = tmp_path / "config.json"
    config.write_text(
        json.dumps(
            {
                "mcpServers": {"everything": {"command": node, "args": [str(EVERYTHING), "stdio"]}},
                "toolwise": {"database_url": f"sqlite+aiosqlite:///{tmp_path / 'toolwise.db'}", "sync_interval_s": 0},
            }
        )
    )
    proxied = StdioServerParameters(command=str(BIN / "toolwise"), args=["serve", "--config", str(config)])
    plain: Callable[[str], str] = lambda name: name  # noqa: E731
    named: Callable[[str], str] = lambda name: f"everything__{name}"  # noqa: E731
    seen_direct, seen_proxied = Observer(), Observer()
    async with connect(direct, "legacy", seen_direct) as client:  # server-everything speaks 2025-11-25 only
        want = await observe(client, seen_direct, plain, plain)
    async with connect(proxied, mode, seen_proxied) as client:
        got = await observe(client, seen_proxied, named, named)
        modern = not client.protocol_version.startswith("2025")
    assert want["progress"] == [1, 2, 3, 4] and want["logs_during_calls"] and want["sampling"] and want["roots"]
    want["gated_tools"] = [named(t) for t in want["gated_tools"]]
    want["log_loggers"] = ["everything"]  # toolwise names the server a message comes from
    if modern:
        # 2026-07-28 forbids a server's requests to its client: the downstream is told so.
        for key in ("sampling", "roots", "asked"):
            want.pop(key), got.pop(key)
    assert got == want
