"""A failed call waits for its session's next call to be read (rl/hindsight.py); when the session ends after
a call that taught nothing (cancelled: no reward), the end still reads the failure as the session's last, as
an end after any other call does and as an instance learning the log reads it."""

from __future__ import annotations

from pathlib import Path

import anyio

from tests.server.surface import ok, running
from toolwise.learning.sessions import session_meta


async def test_an_end_after_a_cancelled_call_reads_the_failure_waiting_before_it(tmp_path: Path) -> None:
    async with running(tmp_path) as (app, client):
        meta = session_meta("s")
        assert (await client.call_tool("toy__fail", {"reason": "no such file"}, meta=meta)).is_error
        with anyio.move_on_after(1):  # the user stops the next call
            await client.call_tool("toy__sleep", {"seconds": 30}, meta=meta)
        await app.learning.drain()
        waiting = [session.rpartition("/")[2] for session in app.learning.learner.waiting]
        ok(await client.call_tool("end_session", {"outcome": "failure", "session_id": "s"}))
        await app.learning.drain()
        after = [session.rpartition("/")[2] for session in app.learning.learner.waiting]
    assert waiting == ["s"] and after == []
