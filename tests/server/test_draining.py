"""An HTTP shutdown waits for the calls in flight, not for the streams a client keeps open: a 2026-07-28
`subscriptions/listen` is a POST that stays open as long as the client listens, and is ended at once, as
a GET stream is. `Draining` in front of a bare ASGI app: a call that answers when the test lets it, a
listener that streams until its client leaves."""

from __future__ import annotations

import asyncio
from typing import Any

import anyio

from toolwise.server.draining import Draining

WAIT_S = 10.0  # the longest a step of the test waits for what it expects


def request(method: str) -> dict[str, Any]:
    """The scope of a 2026-07-28 POST of `method` (the era's `Mcp-Method` header names it)."""
    return {"type": "http", "method": "POST", "path": "/mcp", "headers": [(b"mcp-method", method.encode())]}


async def test_a_shutdown_waits_for_a_call_in_flight_but_ends_a_listener_at_once() -> None:
    answer = asyncio.Event()
    ended: list[str] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        method = dict(scope["headers"])[b"mcp-method"].decode()
        if method == "subscriptions/listen":
            while (await receive())["type"] != "http.disconnect":  # streams until its client leaves
                pass
        else:
            await answer.wait()
        ended.append(method)
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def never_sent() -> dict[str, Any]:
        await asyncio.Event().wait()
        raise AssertionError("the client never sends more")

    async def sent(message: Any) -> None:
        return None

    draining = Draining(app)
    listener = asyncio.create_task(draining(request("subscriptions/listen"), never_sent, sent))
    call = asyncio.create_task(draining(request("tools/call"), never_sent, sent))
    await asyncio.sleep(0.05)  # both requests reach the app
    closing = asyncio.create_task(draining.close(3600))
    await asyncio.sleep(0.05)
    assert not closing.done(), "the call in flight was not waited for"
    answer.set()
    with anyio.fail_after(WAIT_S):  # before: the listener counted as a call, waited for the whole grace
        await closing
        await asyncio.gather(listener, call)
    assert ended == ["tools/call", "subscriptions/listen"]
