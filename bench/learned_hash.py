"""What was learned, as one hash: a change meant to make learning faster without changing it must print
the same lines as the code before (run both: `PYTHONPATH=<before>/src python bench/learned_hash.py`).

    python bench/learned_hash.py [--sizes 512,64] [--calls 3000] [--rich]

Learns bench/backlog.py's stream (1,000 tools, BFCL live requests, three a session) in runs of each size (1:
one call at a time), seeded, and prints the SHA-256 of every array and value of `Learner.state_dict()` and of
the rewards, with top-1 on the held-out requests. `--rich`: a fifth of the calls fail (with a fault), a tenth
are rated, each has its session, and a step after a failure is marked so (what the plain stream never
exercises: hindsight, ratings, the after-failure n-grams).
"""

from __future__ import annotations

import argparse
import hashlib
from dataclasses import replace
from typing import Any

import numpy as np
from backlog import catalogue, stream, top1

from toolwise.learning.embedding import load_embedder
from toolwise.rl import Learner, LearnerConfig, Step, StepColumns
from toolwise.rl.steps import ARGUMENTS, FIT, HEALTH


def digest(value: Any, into: Any) -> None:
    """Feed `value` (dicts by sorted key, sequences in order, arrays with their dtype and shape) to `into`."""
    if isinstance(value, dict):
        for key in sorted(value, key=str):
            into.update(repr(key).encode())
            digest(value[key], into)
    elif isinstance(value, list | tuple):
        into.update(b"[%d" % len(value))
        for item in value:
            digest(item, into)
    elif isinstance(value, np.ndarray):
        into.update(f"{value.dtype}{value.shape}".encode())
        into.update(np.ascontiguousarray(value).tobytes())
    elif isinstance(value, float):
        into.update(np.float64(value).tobytes())
    else:
        into.update(repr(value).encode())


def rich(steps: list[Step]) -> list[Step]:
    """The steps with failures (and their faults), ratings, sessions and after-failure marks, seeded."""
    rng = np.random.default_rng(5)
    out: list[Step] = []
    for i, step in enumerate(steps):
        ok = bool(rng.random() > 0.2)
        rating = int(rng.integers(1, 6)) if rng.random() < 0.1 else None
        fault = None if ok else [FIT, HEALTH, ARGUMENTS, None][int(rng.integers(4))]
        after = bool(i % 3 and not out[-1].success)
        latency = float(rng.uniform(20, 3000))
        session = f"s{i // 3}"
        out.append(
            replace(
                step, success=ok, latency_ms=latency, rating=rating, session=session, fault=fault, after_failure=after
            )
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="512,64")
    parser.add_argument("--calls", type=int, default=3_000)
    parser.add_argument("--rich", action="store_true")
    args = parser.parse_args()
    embedder = load_embedder("wordllama")
    docs = catalogue(1_000)
    steps, held = stream(args.calls)
    if args.rich:
        steps = rich(steps)
    for size in [int(s) for s in args.sizes.split(",")]:
        learner = Learner(LearnerConfig(), docs, embedder)
        rng = np.random.default_rng(1)
        rewards: list[float] = []
        if size == 1:
            rewards = [learner.learn(step, rng).reward for step in steps]
        else:
            for start in range(0, len(steps), size):
                rewards.extend(learner.learn_many(StepColumns.of(steps[start : start + size]), rng).tolist())
            learner.settle()
        hashed = hashlib.sha256()
        digest(learner.state_dict(), hashed)
        digest(np.array(rewards), hashed)
        print(f"runs of {size}: {hashed.hexdigest()}  top-1 {top1(learner, held):.3f}", flush=True)


if __name__ == "__main__":
    main()
