"""The choice model: which tool an agent calls in a context, learned from the calls it makes.

Most calls toolwise sees are chosen by the agent (an LLM client picks the tool itself), and most of
them succeed. A reward regression over those calls learns the wrong thing: every called tool scores
1, so a centred residual sinks exactly the tools the prior already had right. What such a stream
does say is *which tool was wanted here*. So the model is a conditional logit (a softmax over the
candidate tools, McFadden's choice model, as in learning-to-rank's ListNet), with a score per tool

    s_t(q, h) = w · f_t(q, h) + θ_tᵀ x(q)

where f_t are the prior's features (cosine of the query and tool embeddings, BM25 over the tool
documents, log(1 + N·P(t | h)), P the sequence model's back-off distribution after the session's
tools h, or the unigram one on a session's first call, and whether the session already called t: an
agent that passes the same request at every step has the text point at the tool it just used), w
their learned weights (the prior's mix, learned online instead of set on one data set) and θ_t a
per-tool weight vector over x(q), the leading components of the query embedding (unit length). There
is no per-tool bias: how often a tool is used is the sequence features' part, and a failure of t
says "not t for this kind of request", never "not t" everywhere.

Learning, by gradient steps on the shortlist's softmax (the top `shortlist` tools by score, with the
called one), AdaGrad-scaled per tool and per feature weight:

- a call that worked (success, not rated 1–2) is a choice: ascend log p_T, weighted by the call's
  normalised reward (fast and well rated counts more). The step raises s_T against every other
  candidate, so learning from a success never lowers the called tool;
- a call that failed (or was rated 1–2) is evidence against it: ascend log(1 − p_T), which lowers T
  in this kind of context and lifts the others in proportion to their probability;
- a recommendation the agent passed over (toolwise said R, the agent called T) is weak evidence
  against R: the same step with weight `passed_over_weight`.

Ranking is by score (the most probable tool first); `expected` is the softmax probability of each
shortlisted tool. Memory: θ is (tools, dim) float64, 1 KB a tool at dim 128; a run of calls (`learn_run`)
keeps a float32 copy of it while it learns, for its minibatches' products over x(q).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from toolwise.rl.blas import one_blas_thread
from toolwise.rl.context import Context
from toolwise.rl.policies.base import (
    FEATURES,
    Capabilities,
    Lesson,
    Lessons,
    PolicyBase,
    Selection,
    Update,
    check_state,
    rank,
    ranked_selection,
)
from toolwise.rl.policies.call_memory import CallMemory


@dataclass(frozen=True, slots=True)
class ChoiceConfig:
    dim: int = 128  # leading embedding components θ learns over
    shortlist: int = 20  # the softmax's candidates: the best-scored tools (plus the called one)
    learning_rate: float = 4.0  # per-tool θ (AdaGrad: divided by √(1 + Σ steps²) of the tool)
    shrinkage: float = 2.0  # θ_tᵀx counts (n + 1)/(n + 1 + this) after n calls of t: thin evidence, the prior
    weight_rate: float = 0.1  # the feature weights w (AdaGrad per feature)
    initial_weights: tuple[float, ...] = (20.0, 5.0, 1.0, 0.5, 0.0)
    passed_over_weight: float = 0.1  # a recommendation the agent did not follow, against a failed call's 1
    replays: int = 8  # past calls learned again after each call (SGD's second look; 0: off)
    replay_capacity: int = 4096  # the most recent calls kept for that
    batch_replays: int = 4  # the same in runs (minibatches: a replay of the log, the learning thread behind)
    epsilon: float = 0.0  # uniform choice over the shortlist (exploration for toolwise's own picks)

    def __post_init__(self) -> None:
        if self.shrinkage < 0:
            raise ValueError(f"need shrinkage ≥ 0, got {self.shrinkage}")
        if self.dim < 8 or self.shortlist < 2:
            raise ValueError(f"need dim ≥ 8 and shortlist ≥ 2, got {self.dim}, {self.shortlist}")
        if self.replays < 0 or self.batch_replays < 0 or self.replay_capacity < 1:
            raise ValueError(f"need replays ≥ 0 and replay_capacity ≥ 1, got {self.replays}, {self.replay_capacity}")
        if self.learning_rate < 0 or self.weight_rate < 0 or not 0 <= self.passed_over_weight <= 1:
            raise ValueError(
                "need learning_rate ≥ 0, weight_rate ≥ 0, 0 ≤ passed_over_weight ≤ 1; got "
                f"{self.learning_rate}, {self.weight_rate}, {self.passed_over_weight}"
            )
        if len(self.initial_weights) != len(FEATURES):
            raise ValueError(f"initial_weights needs {len(FEATURES)} values ({', '.join(FEATURES)})")
        if not 0 <= self.epsilon <= 1:
            raise ValueError(f"need 0 ≤ epsilon ≤ 1, got {self.epsilon}")


BATCH = 32  # calls a minibatch step takes together in `learn_many` (a replay of the log)


def softmax(scores: NDArray[np.float64]) -> NDArray[np.float64]:
    # the ufuncs' reductions that `max` and `sum` wrap, in place: the same numbers, fewer steps (a call
    # learned takes nine softmaxes of a few candidates each)
    z = scores - np.maximum.reduce(scores)
    p: NDArray[np.float64] = np.exp(z, out=z)
    p /= np.add.reduce(p)
    return p


@dataclass(slots=True)
class Minibatch:
    """What a run's minibatches share: θ's float32 copy, kept in step with θ (its products with x(q), the
    most of a minibatch's time, at float32's speed), and the run's distinct x(q) as float32."""

    theta: NDArray[np.float32]
    x: NDArray[np.float32]


class ChoiceModel(PolicyBase):
    name: ClassVar[str] = "choice"
    SCHEMA: ClassVar[int] = 1
    # `inputs` are (arms, len(FEATURES)) feature rows; it replays its own memory of calls, not transitions
    capabilities: ClassVar[Capabilities] = Capabilities(candidates=True, learn_many=True, health=True, hindsight=True)

    def __init__(self, config: ChoiceConfig | None = None) -> None:
        super().__init__()
        self.config = c = config or ChoiceConfig()
        self.weights = np.array(c.initial_weights, dtype=np.float64)
        self.weight_steps = np.zeros(len(FEATURES))  # AdaGrad's Σ g² per feature weight
        self.theta = np.zeros((16, c.dim))
        self.steps = np.zeros(16)  # AdaGrad's Σ d² per tool (its θ and b share it: |x| = 1)
        self.chosen = np.zeros(16, dtype=np.int64)  # calls learned per tool, worked or not (its evidence)
        self.observed = 0
        self.memory = CallMemory(c.replay_capacity, c.dim, c.shortlist + 2)
        self._zero_theta = True  # θ is all zeros (nothing learned yet): θ_tᵀx adds nothing to a score
        self._last: tuple[Context, NDArray[np.float32] | None, NDArray[np.float64]] | None = None  # `features`

    # -- features ----------------------------------------------------------------------------------

    def features(self, context: Context) -> NDArray[np.float64]:
        """x(q): the leading `dim` embedding components (or the folded hashed features), unit length;
        read-only, kept for the last context (a decision and the outcome model read it twice, a learned
        call three times)."""
        last = self._last
        if last is not None and last[0] is context and last[1] is context.embedding:
            return last[2]
        x = self._features(context)
        x.setflags(write=False)
        self._last = (context, context.embedding, x)
        return x

    def features_of(self, contexts: Sequence[Context]) -> NDArray[np.float64]:
        """`features` of each of `contexts`, one row each (a run's distinct queries): with embeddings of one
        length, all rows at once (the same numbers as one at a time). An empty catalogue's "no query" vector
        is shorter than a query's (its index knows no embedding size): one at a time, each padded."""
        dim = self.config.dim
        embeddings = [c.embedding for c in contexts]
        if not contexts or any(e is None for e in embeddings) or len({len(e) for e in embeddings if e is not None}) > 1:
            return np.stack([self.features(c) for c in contexts]) if contexts else np.zeros((0, dim))
        head = np.stack([e[:dim] for e in embeddings if e is not None]).astype(np.float64)
        x = np.zeros((len(contexts), dim))
        x[:, : head.shape[1]] = head
        norms = np.array([math.sqrt(float(row @ row)) for row in x])  # each row's own dot, as `_features`
        x /= np.where(norms > 0, norms, 1.0)[:, None]
        return x

    def _features(self, context: Context) -> NDArray[np.float64]:
        dim = self.config.dim
        if context.embedding is not None:
            x = np.zeros(dim)
            head = np.asarray(context.embedding[:dim], dtype=np.float64)
            x[: len(head)] = head
        else:
            x = np.zeros(dim)
            np.add.at(x, context.indices % dim, context.values)
        norm = math.sqrt(float(x @ x))
        return x / norm if norm else x

    def _ensure(self, arm: int) -> None:
        rows = len(self.steps)
        if arm < rows:
            return
        grow = max(2 * rows, arm + 1) - rows
        self.theta = np.concatenate([self.theta, np.zeros((grow, self.config.dim))])
        self.steps = np.concatenate([self.steps, np.zeros(grow)])
        self.chosen = np.concatenate([self.chosen, np.zeros(grow, dtype=np.int64)])

    # -- deciding ----------------------------------------------------------------------------------

    def scores(
        self,
        x: NDArray[np.float64],
        arms: NDArray[np.int64],
        rows: NDArray[np.float64],
        shrunk: NDArray[np.float64] | None = None,
    ) -> NDArray[np.float64]:
        """s_t for each of `arms`, given their feature `rows` (arms × FEATURES); `shrunk`: their `shrink`,
        when the caller has it already (and has sized the arrays for `arms`)."""
        if shrunk is None and len(arms):
            self._ensure(int(np.maximum.reduce(arms)))
        scores: NDArray[np.float64] = rows @ self.weights
        if not self._zero_theta:  # a fresh model's θ_tᵀx are all 0, adding nothing
            # over 64 arms, one product over every tool (no copy of their rows)
            learned = (self.theta @ x).take(arms) if len(arms) > 64 else self.theta.take(arms, 0) @ x
            scores += learned * (self.shrink(arms) if shrunk is None else shrunk)
        for arm, offset in self.health.items():  # P(chosen) × P(works) for a tool that broke: few, if any
            scores[arms == arm] += offset
        return scores

    def shrink(self, arms: NDArray[np.int64]) -> NDArray[np.float64]:
        """How much of θ_tᵀx counts for each of `arms`: (n + 1)/(n + 1 + shrinkage) after n learned
        calls of t (worked or not: a tool that keeps failing must not have its failures shrunk away).
        Shrinkage toward the prior while a tool's evidence is thin: one call of a tool, made for a
        request that also needed other tools, is weak evidence about requests like it."""
        evidence = self.chosen.take(arms) + 1.0
        shrunk: NDArray[np.float64] = evidence / (evidence + self.config.shrinkage)
        return shrunk

    def expected(self, context: Context, arms: NDArray[np.int64], prior: NDArray[np.float64]) -> NDArray[np.float64]:
        """Each arm's choice probability among `arms` (the softmax of the scores)."""
        return softmax(self.scores(self.features(context), arms, prior))

    def select(
        self, context: Context, arms: NDArray[np.int64], prior: NDArray[np.float64], rng: np.random.Generator
    ) -> Selection:
        c = self.config
        scores = self.scores(self.features(context), arms, prior)
        if len(scores) > c.shortlist:
            short = np.argpartition(-scores, c.shortlist - 1)[: c.shortlist]
            arms, scores = arms.take(short), scores.take(short)
        order, best, ties = rank(scores, rng)
        explored = bool(c.epsilon and rng.random() < c.epsilon)
        pick = int(rng.integers(len(arms))) if explored else best
        propensity = c.epsilon / len(arms) + ((1 - c.epsilon) / ties if scores[pick] == scores[best] else 0.0)
        return ranked_selection(arms, scores, softmax(scores), order, pick, pick != best, propensity)

    # -- learning ----------------------------------------------------------------------------------

    def learn_one(self, lesson: Lesson, rng: np.random.Generator) -> Update:
        """One observed call of `lesson.arm` among its candidates: a choice if it worked, evidence
        against it if not, and the recommendation the agent passed over weakly against; then `replays`
        calls drawn from the recent ones learned again (one SGD pass over a call under-learns it: replay
        brings the per-tool fit closer to the batch optimum; docs/learning.md). The TD error is how
        surprising the outcome was: worked (1) or not (0) less the called tool's probability before."""
        if lesson.candidates is None or lesson.rows is None:
            raise ValueError(f"{self.name} learns a call among its candidates: the lesson has none")
        before = self.learn_call(
            self.features(lesson.context),
            lesson.candidates,
            lesson.rows,
            lesson.arm,
            worked=lesson.worked,
            weight=lesson.weight,
            passed_over=lesson.passed_over,
            rng=rng,
        )
        return Update((1.0 if lesson.worked else 0.0) - before, None)

    def learn_many(self, lessons: Lessons, rng: np.random.Generator) -> None:
        self.learn_run(lessons, rng)

    def learn_run(
        self, lessons: Lessons, rng: np.random.Generator, x: NDArray[np.float64] | None = None
    ) -> NDArray[np.float64]:
        """A run of calls in minibatches of `BATCH` (`learn_calls`), each distinct query's x(q) once (`x`:
        one row per context, computed by the caller); returns each call's probability of the called tool
        before its minibatch (what `learn_call` returns of one)."""
        if lessons.rows is None:
            raise ValueError(f"{self.name} learns calls among their candidates: the run has no feature rows")
        n, candidates = len(lessons), lessons.candidates
        if not n:
            return np.zeros(0)
        if x is None:
            x = self.features_of(lessons.contexts)
        position = np.full(max(int(candidates.max()), int(lessons.arms.max(initial=0))) + 1, -1, dtype=np.int64)
        position[candidates] = np.arange(len(candidates))
        called = position.take(lessons.arms)
        if (called < 0).any():
            raise ValueError(f"the called arm {int(lessons.arms[called < 0][0])} is not among the candidates")
        self._ensure(int(candidates.max()))
        run = Minibatch(self.theta.astype(np.float32), x.astype(np.float32))
        before = np.zeros(n)
        with one_blas_thread():
            for start in range(0, n, BATCH):
                part = range(start, min(start + BATCH, n))
                window = slice(part.start, part.stop)
                before[window] = self.learn_calls(
                    run,
                    lessons.context_of[window],
                    candidates,
                    lessons.rows(part),
                    called[window],
                    lessons.worked[window],
                    lessons.weights[window],
                    rng,
                )
        return before

    def learn_call(
        self,
        x: NDArray[np.float64],
        arms: NDArray[np.int64],
        rows: NDArray[np.float64],
        called: int,
        *,
        worked: bool,
        weight: float = 1.0,
        passed_over: int | None = None,
        rng: np.random.Generator | None = None,
    ) -> float:
        """`learn_one` given the query's features x(q) (`features`) rather than its context: the
        batch path computes them for many calls at once."""
        c = self.config
        self._ensure(max(int(arms.max()), called))
        scores = self.scores(x, arms, rows)
        if len(arms) > c.shortlist:  # the softmax over the best candidates and the called one
            keep = np.argpartition(-scores, c.shortlist - 1)[: c.shortlist]
            inside = np.flatnonzero(arms == called)
            keep = np.union1d(keep, inside)
            if passed_over is not None:
                keep = np.union1d(keep, np.flatnonzero(arms == passed_over))
            arms, rows, scores = arms.take(keep), rows.take(keep, 0), scores.take(keep)
        p = softmax(scores)
        at = np.flatnonzero(arms == called)
        if not len(at):
            raise ValueError(f"the called arm {called} is not among the candidates")
        direction = _towards(p, int(at[0]), weight, worked)
        if passed_over is not None and passed_over != called:
            over = np.flatnonzero(arms == passed_over)
            if len(over):
                direction += _towards(p, int(over[0]), c.passed_over_weight, False)
        self._step(x, arms, rows, direction)
        self.observed += 1
        self.chosen[called] += 1
        if c.replays and rng is not None:
            self.memory.add(x, arms, rows, int(at[0]), worked, weight)
            for slot in rng.integers(len(self.memory), size=c.replays).tolist():
                self._again(slot)
        return float(p[at[0]])

    def learn_calls(
        self,
        run: Minibatch,
        queries: NDArray[np.int64],
        arms: NDArray[np.int64],
        rows: NDArray[np.floating[Any]],
        called: NDArray[np.int64],
        worked: NDArray[np.bool_],
        weight: NDArray[np.float64],
        rng: np.random.Generator | None = None,
    ) -> NDArray[np.float64]:
        """A minibatch of calls (a replay of the log): call r chose `arms[called[r]]` for the query with
        features `run.x[queries[r]]` among `arms` with feature rows `rows[r]`. Every call's step is computed
        against the parameters before the batch; each tool then moves by the mean of its steps (a sum
        would overshoot: a tool called 50 times in a batch would move 50 steps at once), the feature
        weights by the mean gradient. The calls are remembered, and with `rng` `replays` remembered calls
        a call are learned again (`batch_replays`), as one more minibatch. Returns each call's probability
        of its called tool before the step."""
        c = self.config
        batch, k = len(queries), min(c.shortlist, len(arms))
        x = run.x.take(queries, 0)
        in_order = np.array_equal(arms, np.arange(len(arms)))
        theta = run.theta[: len(arms)] if in_order else run.theta.take(arms, 0)  # a run's: read in place
        scores = x @ theta.T  # float32: it only picks the shortlist
        scores += rows @ self.weights.astype(rows.dtype)
        short = np.argpartition(np.negative(scores, out=scores), k - 1, axis=1)[:, :k]
        inside = (short == called[:, None]).any(axis=1)
        short[~inside, -1] = called[~inside]
        at = np.argmax(short == called[:, None], axis=1)
        tools = arms.take(short)
        picked = np.take_along_axis(rows, short[:, :, None], axis=1)  # (batch, k, features)
        before = self._learn_rows(run, x, tools, picked, at, worked, weight)
        self.observed += batch
        self.chosen += np.bincount(arms.take(called), minlength=len(self.chosen))
        self.memory.add_many(x, tools, picked, at, worked, weight)
        if c.batch_replays and rng is not None and len(self.memory):
            slots = rng.integers(len(self.memory), size=c.batch_replays * batch)
            self._learn_rows(run, *self.memory.rows_of(slots))
        return before

    def _learn_rows(
        self,
        run: Minibatch,
        x: NDArray[np.float32],
        tools: NDArray[np.int64],
        rows: NDArray[np.floating[Any]],
        at: NDArray[np.int64],
        worked: NDArray[np.bool_],
        weight: NDArray[np.floating[Any]],
    ) -> NDArray[np.float64]:
        """One minibatch step: row r's candidates are `tools[r]` (−1: none) with feature `rows[r]`, the
        call chose `tools[r, at[r]]`. Steps against the parameters before it; each tool moves by its
        steps' sum over the calls of it in the batch (their mean), the feature weights by the mean gradient.
        The products over x(q) are float32 (with θ's float32 copy, `run`; the steps are added to θ in
        float64): their rounding is far below what a step moves. Returns each call's probability of its
        called tool before the step."""
        c = self.config
        batch, k = tools.shape
        valid = tools >= 0
        padded = not valid.all()  # remembered calls with fewer candidates than the ring is wide
        safe = np.where(valid, tools, 0) if padded else tools
        flat = safe.ravel()
        shrunk = self.shrink(flat).reshape(safe.shape)
        scores = np.einsum("bkd,bd->bk", run.theta.take(safe, 0), x) * shrunk
        scores += np.einsum("bkf,f->bk", rows, self.weights)
        if padded:
            scores[~valid] = -np.inf
        scores -= scores.max(axis=1, keepdims=True)
        p = np.exp(scores, out=scores)
        p /= p.sum(axis=1, keepdims=True)
        mine = np.arange(batch), at
        chosen: NDArray[np.float64] = p[mine]
        # the gradient of log p_called (worked) or log(1 − p_called) (not) on each candidate's score
        direction = p * (np.where(worked, -1.0, chosen / np.maximum(1.0 - chosen, 0.05)) * weight)[:, None]
        direction[mine] = np.where(worked, 1.0 - chosen, -chosen) * weight
        if padded:
            direction[~valid] = 0.0
        moved = direction.ravel()
        self.steps += np.bincount(flat, moved * moved, len(self.steps))
        pairs = np.flatnonzero(valid) if padded else slice(None)  # (tool, call) pairs, each once: no padding
        calls = np.repeat(np.arange(batch), k)
        self._move_theta(run, x, flat[pairs], (moved * shrunk.ravel())[pairs], calls[pairs], tools[mine])
        gradient = np.einsum("bk,bkf->f", direction, rows) / batch
        self.weight_steps += gradient * gradient
        self.weights += c.weight_rate * gradient / np.sqrt(1.0 + self.weight_steps)
        return chosen

    def _move_theta(
        self,
        run: Minibatch,
        x: NDArray[np.float32],
        tools: NDArray[np.int64],
        moved: NDArray[np.float64],
        calls: NDArray[np.int64],
        called: NDArray[np.int64],
    ) -> None:
        """θ_t += rate_t / (calls of t) · Σ moved·x(q) over the (tool, call) pairs of t (`tools[i]`, `calls[i]`:
        each pair once): a (tools × batch) matrix of the steps, times x in float32 (one product instead of
        a scatter of every pair's row of x); θ and its float32 copy move together."""
        tools_n = len(self.steps)
        used = np.flatnonzero(np.bincount(tools, minlength=tools_n))
        rate = self.config.learning_rate / np.sqrt(1.0 + self.steps.take(used))
        rate /= np.maximum(np.bincount(called, minlength=tools_n), 1).take(used)
        slot = np.zeros(tools_n, np.int64)
        slot[used] = np.arange(len(used))
        at = slot.take(tools)
        per_call = np.zeros((len(used), len(x)), np.float32)
        per_call[at, calls] = moved * rate.take(at)
        theta = self.theta.take(used, 0)
        theta += per_call @ x
        self.theta[used] = theta
        run.theta[used] = theta
        self._zero_theta = False

    def _again(self, slot: int) -> None:
        """Learn the remembered call in `slot` again, as it was (its candidates and their features
        then), against the current parameters."""
        x, arms, rows, at, worked, weight = self.memory.get(slot)
        self._ensure(int(np.maximum.reduce(arms)))
        shrunk = self.shrink(arms)  # the scores' and the step's: `chosen` does not change in between
        p = softmax(self.scores(x, arms, rows, shrunk))
        self._step(x, arms, rows, _towards(p, at, weight, worked), shrunk)

    def _step(
        self,
        x: NDArray[np.float64],
        arms: NDArray[np.int64],
        rows: NDArray[np.float64],
        direction: NDArray[np.float64],
        shrunk: NDArray[np.float64] | None = None,
    ) -> None:
        """Ascend the objective whose gradient on the candidates' scores is `direction` (`shrunk`: the
        arms' `shrink`, when the caller has it). The arms are distinct (a call's candidates)."""
        c = self.config
        steps = self.steps.take(arms)
        steps += direction * direction
        self.steps[arms] = steps  # `steps[arms] += d²`, and what it stored, without reading it back
        rate = c.learning_rate / np.sqrt(1.0 + steps)
        moved = rate * direction * (self.shrink(arms) if shrunk is None else shrunk)  # the chain rule through it
        self.theta[arms] += moved[:, None] * x
        self._zero_theta = False
        gradient = direction @ rows
        self.weight_steps += gradient * gradient
        self.weights += c.weight_rate * gradient / np.sqrt(1.0 + self.weight_steps)

    def set_health(self, arm: int, success_rate: float | None) -> None:
        """A tool that broke lately scores log(its recent success rate) lower everywhere (what it learned
        says where it was wanted; this says whether it works now); None: it works again, no offset."""
        if success_rate is None:
            self.health.pop(arm, None)
        else:
            self.health[arm] = math.log(max(success_rate, 0.02))

    def forget(self, arm: int) -> None:
        """What was learned of one tool no longer holds (the drift guard saw its rewards change):
        its θ and its step sizes start afresh (new evidence moves it at full speed); its evidence count
        stays, so that evidence is not shrunk as a newcomer's; the feature weights stay."""
        self._ensure(arm)
        self.theta[arm] = 0.0
        self.steps[arm] = 0.0

    # -- state -------------------------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        return {
            "policy": self.name,
            "schema": self.SCHEMA,
            "config": asdict(self.config),
            "weights": self.weights.copy(),
            "weight_steps": self.weight_steps.copy(),
            "theta": self.theta.copy(),
            "steps": self.steps.copy(),
            "chosen": self.chosen.copy(),
            "observed": self.observed,
            "memory": self.memory.state_dict(),
        }

    def load_state(self, state: dict[str, Any]) -> None:
        check_state(state, self.name, self.SCHEMA)
        theta = np.asarray(state["theta"], dtype=np.float64)
        if theta.shape[1] != self.config.dim:
            raise ValueError(f"state learned over {theta.shape[1]} components, this policy uses {self.config.dim}")
        self.theta = theta.copy()
        self._zero_theta = not theta.any()
        self.weights = np.asarray(state["weights"], dtype=np.float64).copy()
        self.weight_steps = np.asarray(state["weight_steps"], dtype=np.float64).copy()
        self.steps = np.asarray(state["steps"], dtype=np.float64).copy()
        self.chosen = np.asarray(state["chosen"], dtype=np.int64).copy()
        self.observed = int(state["observed"])
        self.memory.load_state(state["memory"])

    def nbytes(self) -> int:
        return self.memory.nbytes() + self.theta.nbytes + self.steps.nbytes + self.chosen.nbytes + self.weights.nbytes


def _towards(p: NDArray[np.float64], at: int, weight: float, worked: bool) -> NDArray[np.float64]:
    """The gradient on the scores of log p[at] (worked) or log(1 − p[at]) (not), times `weight`."""
    if worked:
        direction: NDArray[np.float64] = -weight * p
        direction[at] += weight
        return direction
    share = p[at] / max(1.0 - p[at], 0.05)  # bounded: a near-certain wrong tool moves by a finite step
    direction = weight * share * p
    direction[at] = -weight * p[at]
    return direction
