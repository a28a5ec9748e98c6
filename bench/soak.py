"""Soak: many clients over streamable HTTP with ratings and random cancellations, then kill -9 and
restart. toolwise wraps bench/echo_server.py and records into a scratch SQLite file.

    python bench/soak.py [--clients 50] [--calls 1000] [--rate-every 10] [--cancel 0.02] [--crash-s 3]

Prints: calls answered vs recorded, ratings answered vs kept, toolwise's RSS before and after the
soak, and what a kill -9 loses (answered calls not recorded, and how long before the kill the oldest
of them was answered: the loss window) with ratings flowing and, as the reference measured in the
same run, without ratings; then that a restart on the same file serves again.

The defaults are the issue's figures: 50,000 calls took 880 s on the project's 2-core machine while
it was shared (the clients, one Python process, are the bottleneck); `--clients 10 --calls 300` takes
about a minute.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from mcp import Client

HERE = Path(__file__).resolve().parent
BIN = Path(sys.executable).parent


@dataclass
class Tally:
    answered: dict[str, float] = field(default_factory=dict)  # execution id → when its answer arrived
    rated: list[str] = field(default_factory=list)  # execution ids whose rating was answered
    cancelled: int = 0
    errors: int = 0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for {pid}")


def start(config: Path, port: int) -> subprocess.Popen[bytes]:
    cmd = [str(BIN / "toolwise"), "serve", "--http", "--port", str(port), "--config", str(config)]
    proc = subprocess.Popen([*cmd, "--log-level", "warning"], stderr=subprocess.DEVNULL)
    for _ in range(600):
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.1):
            return proc
        time.sleep(0.1)
    raise RuntimeError("toolwise did not start listening")


async def client(url: str, calls: int | None, rate_every: int, cancel: float, seed: int, tally: Tally) -> None:
    """One agent: proxied calls, a rating every `rate_every`, and now and then an own-tool call it
    gives up on after a few ms (cancelled in the server). With `calls` None it runs until cut off."""
    rng = random.Random(seed)
    try:
        async with Client(url, mode="legacy") as c:
            i = 0
            while calls is None or i < calls:
                i += 1
                if rng.random() < cancel:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(c.call_tool("get_tool_metrics", {}), rng.uniform(0.002, 0.02))
                        continue
                    tally.cancelled += 1
                result = await c.call_tool("echo__echo", {"text": f"{seed} {i}"})
                if result.is_error:
                    tally.errors += 1
                    continue
                execution_id = (result.meta or {})["toolwise/execution_id"]
                tally.answered[execution_id] = time.monotonic()
                if rate_every and i % rate_every == 0:
                    rating = {"rating": rng.randint(1, 5), "execution_id": execution_id}
                    if not (await c.call_tool("submit_feedback", rating)).is_error:
                        tally.rated.append(execution_id)
    except Exception:
        if calls is not None:
            tally.errors += 1


def recorded(db: Path) -> tuple[set[str], set[str]]:
    with sqlite3.connect(db) as conn:
        executions = {i for (i,) in conn.execute("SELECT id FROM executions")}
        ratings = {i for (i,) in conn.execute("SELECT execution_id FROM ratings")}
    return executions, ratings


async def crash(url: str, proc: subprocess.Popen[bytes], db: Path, clients: int, rate_every: int, secs: float) -> str:
    """Calls (and ratings) flow for `secs`, then kill -9: what was answered but not recorded."""
    tally = Tally()
    tasks = [asyncio.create_task(client(url, None, rate_every, 0.0, 1000 + c, tally)) for c in range(clients)]
    while len(tally.answered) < 2 * clients:  # noqa: ASYNC110 - polls a plain counter: every client calling
        await asyncio.sleep(0.05)
    await asyncio.sleep(secs)
    killed_at = time.monotonic()
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    await asyncio.wait(tasks, timeout=30)
    executions, ratings = recorded(db)
    lost = [t for i, t in tally.answered.items() if i not in executions]
    # An answer read just after the kill was sent before it: such a call counts as answered at the kill.
    window = f"{max(0.0, killed_at - min(lost)) * 1000:.0f} ms" if lost else "0 ms"
    rated_lost = sum(1 for i in tally.rated if i not in ratings)
    return (
        f"{len(tally.answered):,} answered, {len(lost)} lost (loss window {window}); "
        f"{len(tally.rated)} ratings answered, {rated_lost} lost"
    )


async def soak(args: argparse.Namespace, tmp: Path) -> None:
    db, config, port = tmp / "soak.db", tmp / "config.json", free_port()
    settings = {"database_url": f"sqlite+aiosqlite:///{db}", "seed": 0, "snapshot_interval_s": 0}
    echo = {"command": sys.executable, "args": [str(HERE / "echo_server.py")]}
    config.write_text(json.dumps({"mcpServers": {"echo": echo}, "toolwise": settings}))
    url = f"http://127.0.0.1:{port}/mcp"
    proc = start(config, port)
    await client(url, 20, 0, 0.0, 0, Tally())  # warm-up
    before = rss_mb(proc.pid)
    tally, began = Tally(), time.perf_counter()
    await asyncio.gather(
        *(client(url, args.calls, args.rate_every, args.cancel, c, tally) for c in range(args.clients))
    )
    took = time.perf_counter() - began
    after = rss_mb(proc.pid)
    async with Client(url, mode="legacy") as c:
        stats = (await c.call_tool("get_learning_stats", {})).structured_content  # drains and flushes
    executions, ratings = recorded(db)
    kept = sum(1 for i in tally.answered if i in executions)
    print(
        f"soak: {args.clients} clients × {args.calls} calls in {took:.0f} s ({len(tally.answered) / took:,.0f} calls/s)"
    )
    print(f"  answered {len(tally.answered):,}, recorded {kept:,} of them ({len(executions):,} rows, incl. warm-up)")
    print(f"  ratings answered {len(tally.rated):,}, kept {sum(1 for i in tally.rated if i in ratings):,}")
    print(f"  cancelled own-tool calls {tally.cancelled:,}, client errors {tally.errors}")
    print(f"  store {stats['store']}, open sessions {stats['open_sessions']}, dead-lettered {stats['dead_lettered']}")
    print(f"  RSS {before:.0f} MB before, {after:.0f} MB after")
    crash_clients = min(args.clients, args.crash_clients)
    every = args.rate_every or 5
    for label, rate_every in (("without ratings (reference)", 0), (f"rating every {every} calls", every)):
        proc = start(config, port) if proc.poll() is not None else proc
        result = await crash(url, proc, db, crash_clients, rate_every, args.crash_s)
        print(f"kill -9 after {args.crash_s:.0f} s of {crash_clients} clients {label}: {result}")
    proc = start(config, port)
    async with Client(url, mode="legacy") as c:
        stats = (await c.call_tool("get_learning_stats", {})).structured_content
        ok = not (await c.call_tool("echo__echo", {"text": "after"})).is_error
    print(f"restart: serves again ({ok}), learned {stats['synced']:,} log entries on start-up, store {stats['store']}")
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=60)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--calls", type=int, default=1_000, help="proxied calls per client")
    parser.add_argument("--rate-every", type=int, default=10, help="rate every Nth call (0: no ratings)")
    parser.add_argument("--cancel", type=float, default=0.02, help="chance per call of a cancelled own-tool call")
    parser.add_argument("--crash-s", type=float, default=3.0, help="seconds of traffic before each kill -9")
    parser.add_argument("--crash-clients", type=int, default=20, help="clients during the crash phases")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(soak(args, Path(tmp)))


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
