"""A resource subscription toolwise makes at a downstream for its clients is made once, whoever asked
first: a client that goes away while it is being made does not cut it short for a client that asked
meanwhile, which hears the resource's updates. In-process through `Client(server)`, the downstream an
SDK server that takes handshake-era subscriptions and answers the first one when the test lets it."""

from __future__ import annotations

import asyncio
from pathlib import Path

import anyio
from mcp import Client
from mcp.server.session import ServerSession

from tests.server.memo_server import Updates, memo, subscribe
from tests.server.surface import running, text
from toolwise.config import AppConfig, InProcessServer
from toolwise.server.app import Toolwise
from toolwise.server.build import build_server

WAIT_S = 10.0  # the longest a step of the test waits for what it expects


async def test_a_subscriber_that_goes_away_does_not_cut_short_the_subscription_of_another(tmp_path: Path) -> None:
    subscribed: list[ServerSession] = []
    asked, answer = asyncio.Event(), asyncio.Event()
    updates = Updates()
    heard = updates.heard

    downstream = {"memo": InProcessServer(memo(subscribed, asked, answer))}
    async with (
        running(tmp_path, {}, in_process=downstream) as (app, leaving),
        Client(build_server(app), mode="legacy", message_handler=updates) as staying,
    ):
        first = asyncio.create_task(subscribe(leaving, "memo://x"))
        with anyio.fail_after(WAIT_S):
            await asked.wait()  # toolwise is making the downstream subscription for the first client
        second = asyncio.create_task(subscribe(staying, "memo://x"))
        await asyncio.sleep(0.1)  # the second client's request reaches toolwise
        first.cancel()  # the first client goes away (its request cancelled)
        await asyncio.wait([first])
        answer.set()
        with anyio.fail_after(WAIT_S):
            await second
        assert text(await staying.call_tool("memo__touch", {})) == "told 1"  # subscribed at the downstream
        with anyio.fail_after(WAIT_S):
            while not heard:
                await anyio.sleep(0.01)
    assert heard == ["memo://x"]


async def test_a_subscriber_found_gone_leaves_no_downstream_subscription_behind(tmp_path: Path) -> None:
    """A client found gone (a notification to it failed: `unsubscribe_all`) is forgotten; when it was the
    last subscriber, the downstream subscription goes too: the next client to subscribe makes one anew,
    and hears each update once (not once per subscription toolwise had left behind at the downstream)."""
    subscribed: list[ServerSession] = []
    updates = Updates()
    heard = updates.heard

    downstream = {"memo": InProcessServer(memo(subscribed))}
    async with running(tmp_path, {}, in_process=downstream) as (app, client):
        subscriptions = app.passthrough.subscriptions
        async with Client(build_server(app), mode="legacy") as leaving:
            await subscribe(leaving, "memo://x")
            gone = list(subscriptions.subscribers["memo://x"])
        subscriptions.unsubscribe_all(gone)  # as when telling it of a change fails
        with anyio.fail_after(WAIT_S):
            while subscribed:  # the downstream subscription is undone
                await anyio.sleep(0.01)
        async with Client(build_server(app), mode="legacy", message_handler=updates) as next_client:
            await subscribe(next_client, "memo://x")
            assert text(await client.call_tool("memo__touch", {})) == "told 1"  # one subscription there
            with anyio.fail_after(WAIT_S):
                while not heard:
                    await anyio.sleep(0.01)
    assert heard == ["memo://x"]


async def test_a_subscription_is_made_again_when_its_downstream_reconnects(tmp_path: Path) -> None:
    """A downstream that restarts (here: its connection lost, the in-process server kept) knows nothing of
    the subscriptions made on the connection before: toolwise makes them again on the new one, and its
    subscribers keep hearing the resource's updates."""
    subscribed: list[ServerSession] = []
    updates = Updates()
    heard = updates.heard

    downstream = {"memo": InProcessServer(memo(subscribed))}
    async with running(tmp_path, {}, in_process=downstream, heard=updates) as (app, client):
        await subscribe(client, "memo://x")
        memo_downstream = app.catalogue.downstreams["memo"]
        lost = memo_downstream.client
        assert lost is not None and len(subscribed) == 1
        subscribed.clear()  # a restarted process has none of the subscriptions of before
        memo_downstream.broke(lost)  # a call found its connection closed: reconnected
        with anyio.fail_after(WAIT_S):
            while not subscribed:  # made again on the new connection
                await anyio.sleep(0.01)
        assert memo_downstream.restarts == 1
        assert text(await client.call_tool("memo__touch", {})) == "told 1"
        with anyio.fail_after(WAIT_S):
            while not heard:
                await anyio.sleep(0.01)
    assert heard == ["memo://x"]


async def test_a_listen_stream_that_ends_undoes_every_subscription_though_a_downstream_refuses_one(
    tmp_path: Path,
) -> None:
    """A 2026-07-28 listen stream that ends undoes the downstream subscriptions it made, each one: a
    downstream that refuses its unsubscription does not leave the others made for nobody."""
    refusing: list[ServerSession] = []
    taking: list[ServerSession] = []
    downstreams = {
        "memo": InProcessServer(memo(refusing, unsubscribes=False)),
        "note": InProcessServer(memo(taking, uri="note://y")),
    }
    config = AppConfig.model_validate(
        {
            "mcpServers": {},
            "toolwise": {"database_url": f"sqlite+aiosqlite:///{tmp_path / 'toolwise.db'}", "mode": "legacy"},
        }
    )  # handshake-era downstream connections: their subscriptions are resources/subscribe, undone by unsubscribe
    async with Toolwise(config, in_process=downstreams) as app, Client(build_server(app)) as client:
        await client.list_resources()
        async with client.listen(resource_subscriptions=["memo://x", "note://y"]):
            assert (len(refusing), len(taking)) == (1, 1)
        with anyio.fail_after(WAIT_S):
            while taking:  # note's is undone all the same
                await anyio.sleep(0.01)
        assert app.passthrough.subscriptions.subscribers == {}


async def test_a_subscription_renewed_twice_at_once_is_made_once(tmp_path: Path) -> None:
    """A downstream that restarts is renewed for twice in a row (its handshake-era twin found lost, then its
    connection made anew: `Subscriptions.renew` each time) while the first renewal is still being made: the
    subscription is made once on the new process, not once per renewal, and its subscribers hear each update
    once (not twice, for as long as toolwise runs)."""
    subscribed: list[ServerSession] = []
    updates = Updates()
    heard = updates.heard

    downstream = {"memo": InProcessServer(memo(subscribed))}
    async with running(tmp_path, {}, in_process=downstream, heard=updates) as (app, client):
        await subscribe(client, "memo://x")
        subscriptions = app.passthrough.subscriptions
        assert len(subscribed) == 1
        subscribed.clear()  # a restarted process has none of the subscriptions of before
        subscriptions.renew("memo", twin=True)  # its twin found lost
        subscriptions.renew("memo")  # its connection made anew, the first renewal not yet made
        renewals = [t for t in asyncio.all_tasks() if t.get_name() == "toolwise-resubscribe-memo"]
        with anyio.fail_after(WAIT_S):
            await asyncio.wait(renewals)
        assert text(await client.call_tool("memo__touch", {})) == "told 1"
        with anyio.fail_after(WAIT_S):
            while not heard:
                await anyio.sleep(0.01)
        await anyio.sleep(0.2)  # a second relay of the update, if any, arrives
    assert heard == ["memo://x"]
