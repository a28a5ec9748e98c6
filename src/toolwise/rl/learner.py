"""The learner: one object the server talks to. Pure computation; the caller passes the RNG.

It owns the tool index (ids, the listed tools, how a query matches each), the running mean latency
per tool (for the reward's speed bonus), the policy, the replay buffer and the sequence model, and the
parts it works through: deciding (`ranking.py`), a step as the policy learns it (`lessons.py`), the
failures waiting for their session's next call (`waiting.py`), the drift watch (`watch.py`) and its
state as plain data (`learner_state.py`); its settings are `learner_config.py`'s.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from numpy.typing import NDArray

from toolwise.rl.batch import learn_run
from toolwise.rl.context import Context, embedded
from toolwise.rl.decisions import Decision
from toolwise.rl.embedding import Embedder
from toolwise.rl.exploration import Drift, Exploration
from toolwise.rl.features import Features
from toolwise.rl.hindsight import waits
from toolwise.rl.learner_config import LearnerConfig
from toolwise.rl.learner_state import STATE_SCHEMA, StateParts
from toolwise.rl.lessons import Lessons
from toolwise.rl.policies import make_policy
from toolwise.rl.policies.base import Selection, no_pause
from toolwise.rl.ranking import Ranking
from toolwise.rl.replay import PrioritizedReplay
from toolwise.rl.reward import Latencies, compute_reward, normalise, rating_points
from toolwise.rl.sequences import NextTool, SequenceModel
from toolwise.rl.steps import Step, StepColumns, worked
from toolwise.rl.toolindex import ToolDoc, ToolIndex
from toolwise.rl.waiting import WAIT_CALLS, Waiting
from toolwise.rl.watch import DriftWatch

__all__ = ["STATE_SCHEMA", "WAIT_CALLS", "Learner", "LearnerConfig", "Observation"]  # what others import here


@dataclass(slots=True)
class Observation:
    reward: float
    normalised: float
    td_error: float
    context_hash: str


class Learner:
    def __init__(
        self, config: LearnerConfig | None = None, tools: Sequence[ToolDoc] = (), embedder: Embedder | None = None
    ) -> None:
        """`embedder` turns the prior semantic (tool documents and queries embedded); without one the
        prior is lexical (BM25)."""
        self.config = config or LearnerConfig()
        self.index = ToolIndex(embedder, self.config.lexical_weight)
        self.policy = make_policy(self.config.policy, self.config.policy_config)
        self.replay = PrioritizedReplay(self.config.replay_capacity, self.config.replay_alpha)
        self.sequences = SequenceModel(self.config.sequence_n, self.config.sequence_min_count)
        self.features = Features(self.index, self.sequences, self.config.sequences_enabled)
        self.latency = Latencies()
        self.updates = 0
        self.reward_sum = 0.0
        self.exploration = Exploration(self.config.exploration)
        self.waiting = Waiting()  # each session's failed last call, waiting for the next (rl/hindsight.py)
        self.drift = DriftWatch(self.exploration, self.index, self.policy)
        self.ranking = Ranking(self.index, self.features, self.policy, self.exploration, self.config.fit, self.encode)
        self.lessons = Lessons(self.index, self.features, self.policy, self.encode)
        self.state_parts = StateParts(
            self.config,
            self.index,
            self.latency,
            self.policy,
            self.replay,
            self.sequences,
            self.exploration,
            self.waiting,
        )
        self.set_tools(tools)

    def set_tools(
        self,
        tools: Sequence[ToolDoc],
        vectors: Mapping[str, NDArray[np.float32]] | None = None,
        later: Collection[str] = (),
    ) -> None:
        """The current catalogue. Ids are stable: a tool that disappears and returns keeps its learning.
        `vectors`: documents embedded ahead; `later`: documents BM25 alone scores until then
        (`ToolIndex.set_tools`)."""
        self.index.set_tools(tools, vectors, later)
        self.latency.grow(len(self.index.tools))

    def encode(self, query: str | None, previous_tool: str | None, position: int) -> Context:
        """The context, with the query's embedding when the prior is semantic (embedded once per query)."""
        context = self.config.encoder.encode(query, previous_tool, position)
        semantic = self.index.semantic
        if semantic is None:
            return context
        # no query, nothing to learn over: the zero vector keeps the policy in the embedding's space
        return embedded(context, lambda: semantic.query(query) if query else semantic.no_query)

    # -- deciding ----------------------------------------------------------------------------------

    def recommend(
        self,
        query: str | None,
        rng: np.random.Generator,
        *,
        previous_tool: str | None = None,
        position: int = 0,
        candidates: Iterable[str] | None = None,
        top_k: int = 5,
        exclude: Collection[str] = (),
        baseline: bool = False,
        named_first: bool = False,
        history: Sequence[str] = (),
        tried: Collection[str] = (),
    ) -> Decision:
        """Rank tools for a query. `exclude` drops tools (shields); `baseline` ranks by the
        deterministic prior alone (shadow mode: the policy is neither asked nor advanced);
        `named_first` gives a tool the query names (`uber.ride`, see rl/names.py) full relevance, so it
        ranks first unless learning says otherwise (a search; learning is unchanged: it keeps the prior);
        `tried`: the tools the session already called for this very request, each failing (rl/fit.py's
        `tried_unfit`: enough of them, nothing fits)."""
        decision = self.ranking.recommend(
            query,
            rng,
            previous_tool=previous_tool,
            position=position,
            candidates=candidates,
            top_k=top_k,
            exclude=exclude,
            baseline=baseline,
            named_first=named_first,
            history=history,
            tried=tried,
        )
        decision.learned = self.updates  # a decision of its own, made just now: no copy
        return decision

    def nothing_fits(self, query: str | None, arms: NDArray[np.int64], selection: Selection, context: Context) -> bool:
        """No candidate seems to serve the request: its words match none, or it is far from all the first
        candidate worked for (rl/fit.py), or the best ones were each seen to fail for such requests (`all_fail`),
        or requests alike were seen failing on them (`FailedFit`)."""
        return self.ranking.nothing_fits(query, arms, selection, context)

    def recommend_next(
        self,
        recent_tools: Sequence[str],
        candidates: Iterable[str] | None = None,
        top_k: int = 5,
        *,
        after_failure: bool = False,
    ) -> list[NextTool]:
        """The agent's likeliest next calls after `recent_tools` (`after_failure`: the last of them failed)."""
        if not self.config.sequences_enabled:
            return []
        return self.sequences.recommend_next(recent_tools, candidates, top_k, after_failure=after_failure)

    def estimates(self, query: str | None, previous_tool: str | None, position: int) -> list[tuple[str, float, float]]:
        """(tool, the policy's estimate, prior) for every active tool, best first: what the policy reports of
        each for a context (`Policy.expected`), without exploration (for inspection)."""
        return self.ranking.estimates(query, previous_tool, position)

    # -- learning ----------------------------------------------------------------------------------

    def reward_of(self, step: Step) -> float:
        """The step's reward now. Takes no lock and may run beside `learn` on another thread (a trace's
        reward, on the event loop): the tool's id is one dict look-up (atomic, and a restore replaces the
        interner whole) and `Latencies.mean_of` reads its arrays safely; the mean may be a step stale."""
        return compute_reward(
            self.config.reward,
            success=step.success,
            latency_s=step.latency_ms / 1000,
            rating=step.rating,
            mean_latency_s=self.latency.mean_of(self.index.tools.get(step.tool)),
        )

    def context_hash(self, step: Step) -> str:
        """The hash of the step's context: what its record keeps (`learn` returns it too)."""
        return self.config.encoder.encode(step.query, step.previous_tool, step.position).hash

    def learn(
        self, step: Step, rng: np.random.Generator, *, reward: float | None = None, update: bool = True
    ) -> Observation:
        """The one entry per step: the step's reward (computed unless given) and context hash (what its
        record keeps), computed once, and with `update` the policy, replay, sequences and running
        latency learn from it (without, nothing changes: learning switched off still records rewards)."""
        reward = self.reward_of(step) if reward is None else reward
        if not update:  # the hash alone: nothing reads the query's embedding
            return Observation(reward, normalise(self.config.reward, reward), 0.0, self.context_hash(step))
        context = self.encode(step.query, step.previous_tool, step.position)
        if step.session is not None:
            self.read_waiting(step.session, rng, next_tool=step.tool)
        if self.policy.capabilities.hindsight and waits(step):
            self.updates += 1
            self.reward_sum += reward
            self.hold(step, reward)
            observation = Observation(reward, normalise(self.config.reward, reward), 0.0, context.hash)
        else:
            observation = self._learn(step, reward, rng, context)
        if self.waiting:
            self.age(rng)
        ok = worked(step.success, step.rating)
        self.watch(step.tool, observation.normalised, ok)
        self.latency.add(self.index.tools.intern(step.tool), step.latency_ms / 1000)
        if self.config.sequences_enabled:
            self.sequences.observe_step(step.history, step.tool, reward, ok, after_failure=step.after_failure)
        return observation

    def learn_many(
        self,
        steps: StepColumns,
        rng: np.random.Generator,
        *,
        minibatch: int | None = None,
        pause: Callable[[], None] = no_pause,
    ) -> NDArray[np.float64]:
        """Learn a run of steps in order, as `learn` would one by one (a replay of the log, a burst of
        calls: see rl/batch.py), `minibatch` calls a step where the policy learns in minibatches (None: the
        policy's own), `pause()` called between the run's parts (`learn_run`); returns each step's reward."""
        return learn_run(self, steps, rng, minibatch, pause)

    def hold(self, step: Step, reward: float) -> None:
        """A failure waits for its session's next call (counted already; `age` reads it as the session's end
        once it has waited too long)."""
        self.waiting.hold(step, reward, self.updates)

    def age(self, rng: np.random.Generator) -> None:
        """Read the failures waiting past `WAITING` sessions or `WAIT_CALLS` calls as their sessions' ends:
        a session may never end (an agent framework's, a connection that is never closed)."""
        while (session := self.waiting.overdue(self.updates)) is not None:
            self.read_waiting(session, rng)

    def read_waiting(self, session: str, rng: np.random.Generator, *, next_tool: str | None = None) -> None:
        """The session's failed last call, waiting for what came next, is learned now: `next_tool` is the
        session's next call's tool (None: the session ended). See rl/hindsight.py."""
        found = self.waiting.pop(session)
        if found is not None:
            step, reward = found
            context = self.encode(step.query, step.previous_tool, step.position)
            self._learn(step, reward, rng, context, next_tool, waited=True)

    def end_episode(self, step: Step, reward: float, rng: np.random.Generator) -> Observation | None:
        """The session ended after `step` (already noted, with `reward` as it stands now): a failure
        of it waiting for a next call is learned as ended; a TD policy learns its transition again as
        terminal, so ending there is not valued by a next context that never came; a bandit has no
        future term to drop and learns nothing more (None)."""
        if step.session is not None:
            self.read_waiting(step.session, rng)
        if not self.policy.capabilities.next_context:
            return None
        context = self.encode(step.query, step.previous_tool, step.position)
        return self._learn(replace(step, terminal=True), reward, rng, context)

    def watch(self, tool: str, normalised: float, ok: bool) -> Drift | None:
        """Feed the adaptive ε and the drift guard; a tool whose rewards changed is forgotten by the
        policy (its old evidence no longer describes it) and re-opened for exploration."""
        return self.drift.watch(tool, normalised, ok, self.updates)

    def reward_before_rating(
        self, step: Step, stored: float | None, stored_rating: int | None, previous: int | None
    ) -> float:
        """The reward of a rated step as its `previous` rating left it, what `observe_rating` moves by the
        new rating's points: the `stored` reward (including `stored_rating`) moved by the ratings' points, so
        the speed bonus stays as judged when the call was made; never stored (not learned from): as now."""
        if stored is None:
            return self.reward_of(replace(step, rating=previous))
        return stored if stored_rating == previous else self.rerated(stored, previous, stored_rating)

    def rerated(self, reward: float, rating: int | None, previous: int | None) -> float:
        """`reward`, which rating `previous` had left (None: unrated), as `rating` leaves it: moved by their
        points alone."""
        weights = self.config.reward
        return reward + rating_points(weights, rating) - rating_points(weights, previous)

    def observe_rating(
        self, step: Step, rng: np.random.Generator, previous_reward: float, previous_rating: int | None = None
    ) -> Observation:
        """A user rated an execution already observed (its reward `previous_reward`, rated `previous_rating`):
        the policy learns from it again with the rated reward (a second, stronger observation) and the step's
        n-gram statistics are revised, so a follow-up users rate badly stops counting as a successful
        sequence. Latency is not recounted: the rating moves the reward by its points alone (the speed bonus
        stays as judged when the call was made, not against the tool's mean latency now)."""
        if step.rating is None:
            raise ValueError("observe_rating needs a step with a rating")
        reward = self.rerated(previous_reward, step.rating, previous_rating)
        context = self.encode(step.query, step.previous_tool, step.position)
        fit_before = float(worked(step.success, previous_rating)) if step.success else None
        observation = self._learn(step, reward, rng, context, fit_before=fit_before, revision=True)
        if self.config.sequences_enabled:
            success_delta = int(worked(step.success, step.rating)) - int(worked(step.success, previous_rating))
            change = observation.reward - previous_reward
            self.sequences.revise(step.history, step.tool, change, success_delta, after_failure=step.after_failure)
        return observation

    def _learn(
        self,
        step: Step,
        reward: float,
        rng: np.random.Generator,
        context: Context,
        next_tool: str | None = None,
        *,
        fit_before: float | None = None,
        revision: bool = False,
        waited: bool = False,
    ) -> Observation:
        """The policy learns the step (its lesson: rl/lessons.py), counted unless it `waited` (counted when
        noted), and replays a batch of what it learned every `replay_every` updates."""
        scaled = normalise(self.config.reward, reward)
        lesson = self.lessons.of(step, scaled, context, next_tool, fit_before=fit_before, revision=revision)
        update = self.policy.learn_one(lesson, rng)
        if not waited:  # a call read in hindsight was counted when it was noted
            self.updates += 1
            self.reward_sum += reward
        if self.policy.capabilities.replay and update.transition is not None and self.config.replay_enabled:
            self.replay.add(update.transition)
            if self.updates % self.config.replay_every == 0 and len(self.replay) >= self.config.replay_batch:
                batch = self.replay.sample(self.config.replay_batch, rng)
                self.replay.update_priorities(batch.slots, self.policy.replay(batch))
        return Observation(reward, scaled, update.td_error, context.hash)

    def count(self, rewards: NDArray[np.float64]) -> None:
        """A batch learned these rewards: counted as step by step would (the sum added in order)."""
        self.updates += len(rewards)
        self.reward_sum = float(np.cumsum(np.concatenate([[self.reward_sum], rewards]))[-1])

    def settle(self) -> None:
        """After a run of `learn_many`: finish what the policy left pending (it settles by itself when
        read; this does it now, and frees what it kept between batches) and compact the n-grams the run
        built."""
        self.policy.finish_batches()
        self.sequences.compact()

    # -- state -------------------------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        return self.state_parts.state_dict(self.updates, self.reward_sum)

    def load_state(self, state: dict[str, Any]) -> None:
        self.updates, self.reward_sum = self.state_parts.load_state(state)

    def nbytes(self) -> int:
        """Memory of the learned numeric state (policy arrays), in bytes."""
        return int(self.policy.nbytes())
