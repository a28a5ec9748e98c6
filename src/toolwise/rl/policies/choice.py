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

This module holds the model's state and decides what is learned when (a call, a run, the replays);
how far a step moves its arrays is choice_step.py, x(q) choice_features.py, the settings choice_config.py.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from toolwise.rl.blas import one_blas_thread
from toolwise.rl.context import Context
from toolwise.rl.ids import grown_rows, in_order
from toolwise.rl.policies.base import (
    FEATURES,
    Capabilities,
    Lesson,
    Lessons,
    PolicyBase,
    Selection,
    Update,
    best_k,
    called_at,
    check_state,
    rank,
    ranked_selection,
    state_head,
)
from toolwise.rl.policies.call_memory import CallMemory
from toolwise.rl.policies.choice_config import ChoiceConfig
from toolwise.rl.policies.choice_features import query_features, stacked_features
from toolwise.rl.policies.choice_step import (
    Calls,
    Minibatch,
    minibatch_shortlist,
    minibatch_step,
    shortlist,
    shortlisted_softmax,
    shrink,
    softmax,
    step,
    towards,
)

BATCH = 32  # calls a minibatch step takes together in `learn_many` (a replay of the log)


@dataclass(frozen=True, slots=True)
class Run:
    """What a run of calls learned (`ChoiceModel.learn_run`) hands back, a row a call."""

    p_before: NDArray[np.float64]  # the called tool's probability before its minibatch
    cosine: NDArray[np.float64]  # the called tool's query–tool cosine (its row's first feature)


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
        x = query_features(context, self.config.dim)
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
        return stacked_features([e for e in embeddings if e is not None], dim)

    def _ensure(self, arm: int) -> None:
        rows = len(self.steps)
        if arm < rows:
            return
        grow = grown_rows(rows, [arm]) - rows
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
        return shrink(self.chosen, arms, self.config.shrinkage)

    def expected(self, context: Context, arms: NDArray[np.int64], prior: NDArray[np.float64]) -> NDArray[np.float64]:
        """Each arm's choice probability among `arms` as `select` reports it (over the shortlist)."""
        return shortlisted_softmax(self.scores(self.features(context), arms, prior), self.config.shortlist)

    def select(
        self, context: Context, arms: NDArray[np.int64], prior: NDArray[np.float64], rng: np.random.Generator
    ) -> Selection:
        c = self.config
        scores = self.scores(self.features(context), arms, prior)
        if len(scores) > c.shortlist:
            short = best_k(scores, c.shortlist)
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

    def learn_run(self, lessons: Lessons, rng: np.random.Generator, x: NDArray[np.float64] | None = None) -> Run:
        """A run of calls in minibatches of `lessons.minibatch` or else `BATCH` (`learn_calls`), each distinct
        query's x(q) once (`x`: one row per context, computed by the caller); returns each call's probability of
        the called tool before its minibatch (what `learn_call` returns of one) and its cosine (`Run`)."""
        if lessons.rows is None:
            raise ValueError(f"{self.name} learns calls among their candidates: the run has no feature rows")
        n, candidates = len(lessons), lessons.candidates
        if not n:
            return Run(np.zeros(0), np.zeros(0))
        if x is None:
            x = self.features_of(lessons.contexts)
        position = np.full(max(int(candidates.max()), int(lessons.arms.max(initial=0))) + 1, -1, dtype=np.int64)
        position[candidates] = np.arange(len(candidates))
        called = position.take(lessons.arms)
        if (called < 0).any():
            raise ValueError(f"the called arm {int(lessons.arms[called < 0][0])} is not among the candidates")
        self._ensure(int(candidates.max()))
        run = Minibatch(self.theta.astype(np.float32), x.astype(np.float32), in_order(candidates))
        before, cosine = np.zeros(n), np.zeros(n)
        size = lessons.minibatch or BATCH
        with one_blas_thread():
            for start in range(0, n, size):
                if start:
                    lessons.pause()
                part = range(start, min(start + size, n))
                window = slice(part.start, part.stop)
                rows = lessons.rows(part)
                cosine[window] = rows[np.arange(len(part)), called[window], 0]
                before[window] = self.learn_calls(
                    run,
                    lessons.context_of[window],
                    candidates,
                    rows,
                    called[window],
                    lessons.worked[window],
                    lessons.weights[window],
                    rng,
                )
        return Run(before, cosine)

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
            keep = shortlist(scores, arms, called, passed_over, c.shortlist)
            arms, rows, scores = arms.take(keep), rows.take(keep, 0), scores.take(keep)
        p = softmax(scores)
        at = called_at(arms, called)
        direction = towards(p, at, weight, worked)
        if passed_over is not None and passed_over != called:
            over = np.flatnonzero(arms == passed_over)
            if len(over):
                direction += towards(p, int(over[0]), c.passed_over_weight, False)
        self._step(x, arms, rows, direction)
        self.observed += 1
        self.chosen[called] += 1
        if c.replays and rng is not None:
            self.memory.add(x, arms, rows, at, worked, weight)
            for slot in rng.integers(len(self.memory), size=c.replays).tolist():
                self._again(slot)
        return float(p[at])

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
        x, tools, picked, at = minibatch_shortlist(run, queries, arms, rows, called, self.weights, k)
        before = self._learn_rows(run, Calls(x, tools, picked, at, worked, weight))
        self.observed += batch
        self.chosen += np.bincount(arms.take(called), minlength=len(self.chosen))
        self.memory.add_many(x, tools, picked, at, worked, weight)
        if c.batch_replays and rng is not None and len(self.memory):
            slots = rng.integers(len(self.memory), size=c.batch_replays * batch)
            self._learn_rows(run, self.memory.rows_of(slots))
        return before

    def _learn_rows(self, run: Minibatch, calls: Calls) -> NDArray[np.float64]:
        """`choice_step.minibatch_step` on this model's parameters."""
        c = self.config
        before = minibatch_step(
            self.theta,
            self.steps,
            self.weights,
            self.weight_steps,
            self.chosen,
            run,
            calls,
            shrinkage=c.shrinkage,
            learning_rate=c.learning_rate,
            weight_rate=c.weight_rate,
        )
        self._zero_theta = False
        return before

    def _again(self, slot: int) -> None:
        """Learn the remembered call in `slot` again, as it was (its candidates and their features
        then), against the current parameters."""
        x, arms, rows, at, worked, weight = self.memory.get(slot)
        self._ensure(int(np.maximum.reduce(arms)))
        shrunk = self.shrink(arms)  # the scores' and the step's: `chosen` does not change in between
        p = softmax(self.scores(x, arms, rows, shrunk))
        self._step(x, arms, rows, towards(p, at, weight, worked), shrunk)

    def _step(
        self,
        x: NDArray[np.float64],
        arms: NDArray[np.int64],
        rows: NDArray[np.float64],
        direction: NDArray[np.float64],
        shrunk: NDArray[np.float64] | None = None,
    ) -> None:
        """`choice_step.step` on this model's parameters (`shrunk`: the arms' `shrink`, when the caller has it)."""
        c = self.config
        shrunk = self.shrink(arms) if shrunk is None else shrunk
        step(
            self.theta,
            self.steps,
            self.weights,
            self.weight_steps,
            x,
            arms,
            rows,
            direction,
            shrunk,
            learning_rate=c.learning_rate,
            weight_rate=c.weight_rate,
        )
        self._zero_theta = False

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
            **state_head(self.name, self.SCHEMA, self.config),
            "weights": self.weights.copy(),
            "weight_steps": self.weight_steps.copy(),
            "theta": self.theta.copy(),
            "steps": self.steps.copy(),
            "chosen": self.chosen.copy(),
            "observed": self.observed,
            "memory": self.memory.state_dict(),
            "health": [[arm, offset] for arm, offset in self.health.items()],  # pairs: JSON keys are strings
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
        self.health.clear()  # in place: an outcome policy ranks by the same table
        self.health.update((int(arm), float(offset)) for arm, offset in state.get("health", ()))

    def nbytes(self) -> int:
        return self.memory.nbytes() + self.theta.nbytes + self.steps.nbytes + self.chosen.nbytes + self.weights.nbytes
