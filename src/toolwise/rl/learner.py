"""The learner: one object the server talks to. Pure computation; the caller passes the RNG.

It owns the tool index (ids, the listed tools, how a query matches each), the running mean latency
per tool (for the reward's speed bonus), the policy, the replay buffer and the sequence model.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np
from numpy.typing import NDArray

from toolwise.rl.batch import learn_run
from toolwise.rl.context import Context, ContextEncoder, embedded
from toolwise.rl.decisions import Decision, Ranked, decision_id
from toolwise.rl.embedding import Embedder
from toolwise.rl.exploration import Drift, Exploration, ExplorationConfig
from toolwise.rl.features import Features
from toolwise.rl.fit import FitConfig, all_fail, nothing_fits
from toolwise.rl.hindsight import reading, waits
from toolwise.rl.policies import POLICIES, PolicyConfig, make_policy
from toolwise.rl.policies.base import Lesson, Selection, baseline_selection
from toolwise.rl.replay import PrioritizedReplay
from toolwise.rl.reward import Latencies, RewardWeights, compute_reward, normalise
from toolwise.rl.sequences import NextTool, SequenceModel
from toolwise.rl.steps import Step, StepColumns, worked
from toolwise.rl.toolindex import ToolDoc, ToolIndex

STATE_SCHEMA = 1
HEALTHY = 0.5  # a tool that broke counts as working again once half its recent calls work
WAITING = 4096  # sessions whose last call failed and waits for the next one (the oldest is read as ended)
WAIT_CALLS = 256  # calls learned after which a failure still waiting is read as its session's end


@dataclass(frozen=True, slots=True)
class LearnerConfig:
    policy: str = "outcome"
    policy_config: PolicyConfig | None = None
    reward: RewardWeights = field(default_factory=RewardWeights)
    encoder: ContextEncoder = field(default_factory=ContextEncoder)
    replay_capacity: int = 10_000
    replay_alpha: float = 0.6
    replay_batch: int = 32
    replay_every: int = 10
    sequence_n: int = 3
    sequence_min_count: int = 2
    replay_enabled: bool = True  # capability flags: off, that part neither learns nor serves
    sequences_enabled: bool = True
    lexical_weight: float = 0.25  # with an embedder: BM25 over the tool documents added to the cosine, this much
    exploration: ExplorationConfig = field(default_factory=ExplorationConfig)
    fit: FitConfig = field(default_factory=FitConfig)  # when a decision says no tool fits (rl/fit.py)

    def __post_init__(self) -> None:
        if self.policy not in POLICIES:
            raise ValueError(f"policy must be one of {sorted(POLICIES)}, got {self.policy!r}")
        if self.lexical_weight < 0:
            raise ValueError(f"lexical_weight must be ≥ 0, got {self.lexical_weight}")
        if self.replay_batch < 1 or self.replay_every < 1:
            raise ValueError(f"replay_batch and replay_every must be ≥ 1, got {self.replay_batch}, {self.replay_every}")


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
        # session → its failed last call waiting for the next (rl/hindsight.py), its reward, `updates` then
        self.waiting: OrderedDict[str, tuple[Step, float, int]] = OrderedDict()
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
    ) -> Decision:
        """Rank tools for a query. `exclude` drops tools (shields); `baseline` ranks by the
        deterministic prior alone (shadow mode: the policy is neither asked nor advanced);
        `named_first` gives a tool the query names (`uber.ride`, see rl/names.py) full relevance, so it
        ranks first unless learning says otherwise (a search; learning is unchanged: it keeps the prior)."""
        if top_k < 1:
            raise ValueError(f"top_k must be ≥ 1, got {top_k}")
        arms = self.index.arms(candidates)
        tools = self.index.tools
        if exclude:
            dropped = [i for name in exclude if (i := tools.get(name)) is not None]
            arms = arms[~np.isin(arms, dropped)]
        if len(arms) == 0:
            raise ValueError("there are no tools to choose from")
        context = self.encode(query, previous_tool, position)
        named = self.index.names.named(query) if named_first and query else []
        # The prior of every tool, where it ranks them; else only the recommendations' is reported (below)
        whole = baseline or bool(named) or not self.policy.capabilities.candidates
        prior_all = self.features.prior(query, previous_tool) if whole else None
        if named and prior_all is not None:
            prior_all = prior_all.copy()  # the prior is read-only (memoised)
            prior_all[named] = 1.0
        if baseline and prior_all is not None:
            selection = baseline_selection(arms, prior_all.take(arms))
        else:
            inputs = self._inputs(query, history or ((previous_tool,) if previous_tool else ()), arms, prior_all)
            if named and self.policy.capabilities.candidates:
                inputs[np.isin(arms, named), :2] = 1.0
            selection = self.policy.select(context, arms, inputs, rng)
        if not baseline:
            selection = self.exploration.explore(selection, arms, top_k, rng, tools)
        names = tools.names
        top = selection.ranked[:top_k]
        prior = prior_all.take(top) if prior_all is not None else self.features.prior_at(query, previous_tool, top)
        ranked = [
            Ranked(names[a], s, e, p)
            for a, s, e, p in zip(
                top.tolist(),
                selection.scores[:top_k].tolist(),
                selection.expected[:top_k].tolist(),
                prior.tolist(),
                strict=True,
            )
        ]
        if selection.agent is not None and selection.evidence is not None:
            for r, agent, evidence in zip(ranked, selection.agent.tolist(), selection.evidence.tolist(), strict=False):
                r.p_agent, r.evidence = agent, evidence
        return Decision(
            decision_id=decision_id(rng),
            policy="baseline" if baseline else self.policy.name,
            context_hash=context.hash,
            chosen=names[selection.chosen],
            ranked=ranked,
            explored=selection.explored,
            propensity=selection.propensity,
            nothing_fits=not named and self.nothing_fits(query, arms, selection, context),
        )

    def nothing_fits(self, query: str | None, arms: NDArray[np.int64], selection: Selection, context: Context) -> bool:
        """No candidate seems to serve the request: its words match none, or it is far from all the first
        candidate worked for (rl/fit.py), or the best ones were each seen to fail for such requests (`all_fail`)."""
        fit = self.config.fit
        if not fit.enabled:
            return False
        first = selection.ranked[:1]

        def coherence() -> float:
            alike = self.policy.served(context, first)
            return -1.0 if alike is None else float(alike.coherence[0])

        served = self.policy.served(context, first, coherence=False) if query else None
        agent = float(selection.agent[0]) if selection.agent is not None and len(selection.agent) else None
        return nothing_fits(self.index, query, arms, fit, served, coherence, agent) or all_fail(selection)

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
        """(tool, expected normalised reward, prior) for every active tool, best first: what the
        policy has learned for a context, without exploration (for inspection)."""
        context = self.encode(query, previous_tool, position)
        active = self.index.active
        prior_all = self.features.prior(query, previous_tool)
        prior = prior_all.take(active)
        history = (previous_tool,) if previous_tool else ()
        expected = self.policy.expected(context, active, self._inputs(query, history, active, prior_all))
        order = np.argsort(-expected, kind="stable")
        names = self.index.tools.names
        return [(names[active[i]], float(expected[i]), float(prior[i])) for i in order]

    def _inputs(
        self, query: str | None, history: Sequence[str], arms: NDArray[np.int64], prior: NDArray[np.float64] | None
    ) -> NDArray[np.float64]:
        """What the policy reads of each of `arms`: their feature rows (`capabilities.candidates`), or
        their relevance in the prior over every tool (`prior`, needed then only)."""
        if self.policy.capabilities.candidates:
            return self.features.choice_rows(query, history, arms)
        if prior is None:
            raise ValueError(f"policy {self.policy.name!r} reads the prior of every tool: none was given")
        return prior.take(arms)

    # -- learning ----------------------------------------------------------------------------------

    def reward_of(self, step: Step) -> float:
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

    def learn_many(self, steps: StepColumns, rng: np.random.Generator) -> NDArray[np.float64]:
        """Learn a run of steps in order, as `learn` would one by one (a replay of the log, a burst of
        calls: see rl/batch.py); returns each step's reward."""
        return learn_run(self, steps, rng)

    def hold(self, step: Step, reward: float) -> None:
        """A failure waits for its session's next call (counted already; `age` reads it as the session's end
        once it has waited too long)."""
        assert step.session is not None
        self.waiting[step.session] = (step, reward, self.updates)
        self.waiting.move_to_end(step.session)

    def age(self, rng: np.random.Generator) -> None:
        """Read the failures waiting past `WAITING` sessions or `WAIT_CALLS` calls as their sessions' ends:
        a session may never end (an agent framework's, a connection that is never closed)."""
        while self.waiting:
            session, (_, _, at) = next(iter(self.waiting.items()))
            if len(self.waiting) <= WAITING and self.updates - at <= WAIT_CALLS:
                break
            self.read_waiting(session, rng)

    def read_waiting(self, session: str, rng: np.random.Generator, *, next_tool: str | None = None) -> None:
        """The session's failed last call, waiting for what came next, is learned now: `next_tool` is the
        session's next call's tool (None: the session ended). See rl/hindsight.py."""
        found = self.waiting.pop(session, None)
        if found is not None:
            step, reward, _ = found
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
        drift = self.exploration.observe(tool, normalised, ok, self.updates)
        arm = self.index.tools.get(tool)
        if arm is None:
            return drift
        if drift is not None:
            self.policy.forget(arm)
        if self.policy.capabilities.health and (drift is not None or arm in self.policy.health):
            recent = self.exploration.last[tool]  # the share of its last ~10 calls that worked
            if drift is not None:  # it just broke (taken as broken until it shows it works) or recovered
                self.policy.set_health(arm, 0.0 if drift.direction == "fell" else None)
            else:
                self.policy.set_health(arm, recent if recent < HEALTHY else None)
        return drift

    def observe_rating(
        self, step: Step, rng: np.random.Generator, previous_reward: float, previous_rating: int | None = None
    ) -> Observation:
        """A user rated an execution already observed: the policy learns from it again with the rated
        reward (a second, stronger observation) and the step's n-gram statistics are revised, so a
        follow-up users rate badly stops counting as a successful sequence. Latency is not recounted."""
        if step.rating is None:
            raise ValueError("observe_rating needs a step with a rating")
        context = self.encode(step.query, step.previous_tool, step.position)
        fit_before = float(worked(step.success, previous_rating)) if step.success else None
        observation = self._learn(step, self.reward_of(step), rng, context, fit_before=fit_before, revision=True)
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
        """The policy learns the step, given what it declares it reads (`Capabilities`), a failure read
        in hindsight from `next_tool` (rl/hindsight.py). A `revision` (a rating) changes the fit counted
        for the step from `fit_before` (None: none was counted, none is)."""
        capabilities = self.policy.capabilities
        arm = self.index.tools.intern(step.tool)
        scaled = normalise(self.config.reward, reward)
        ok, fit = reading(step, next_tool)
        if revision and fit_before is None:
            fit = None
        candidates = rows = over = None
        prior = 0.0
        if capabilities.candidates:  # the call as a choice among the catalogue (rl/policies/choice.py)
            active = self.index.active
            candidates = active if arm in active else np.append(active, arm)
            history = tuple(step.history) or ((step.previous_tool,) if step.previous_tool else ())
            rows = self.features.choice_rows(step.query, history, candidates)
            over = self.index.tools.get(step.passed_over) if step.passed_over else None
        else:
            prior = self.features.prior_of(step.query, step.previous_tool, arm)
        future = capabilities.next_context and not step.terminal
        lesson = Lesson(
            context,
            arm,
            scaled,
            ok,
            weight=0.5 + 0.5 * (scaled if ok else 1 - scaled),  # how well it went: reward, or its shortfall
            prior=prior,
            next_context=self.encode(step.query, step.tool, step.position + 1) if future else None,
            candidates=candidates,
            rows=rows,
            passed_over=over,
            fit=fit,
            fit_before=fit_before if revision else None,
            followed=step.followed and not revision,
        )
        update = self.policy.learn_one(lesson, rng)
        if not waited:  # a call read in hindsight was counted when it was noted
            self.updates += 1
            self.reward_sum += reward
        if capabilities.replay and update.transition is not None and self.config.replay_enabled:
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
        latency_mean, latency_count = self.latency.state(len(self.index.tools))
        return {
            "schema": STATE_SCHEMA,
            "config": {"policy": self.config.policy, "reward": asdict(self.config.reward)},
            "tools": list(self.index.tools.names),
            "descriptions": dict(self.index.descriptions),
            "active": self.index.active.copy(),
            "latency_mean": latency_mean,
            "latency_count": latency_count,
            "updates": self.updates,
            "reward_sum": self.reward_sum,
            "policy": self.policy.state_dict(),
            "replay": self.replay.state_dict(),
            "sequences": self.sequences.state_dict(),
            "exploration": self.exploration.state_dict(),
            "waiting": [(asdict(step), reward, at) for step, reward, at in self.waiting.values()],
        }

    def load_state(self, state: dict[str, Any]) -> None:
        if state["schema"] != STATE_SCHEMA:
            raise ValueError(f"learner state schema {state['schema']} is not {STATE_SCHEMA}")
        if state["config"]["policy"] != self.config.policy:
            raise ValueError(
                f"state was learned by policy {state['config']['policy']!r}, this learner runs {self.config.policy!r}"
            )
        self.latency.load(state["latency_mean"], state["latency_count"])
        self.updates, self.reward_sum = int(state["updates"]), float(state["reward_sum"])
        self.policy.load_state(state["policy"])
        self.replay.load_state(state["replay"])
        self.sequences.load_state(state["sequences"])
        if "exploration" in state:  # states saved before adaptive exploration start it afresh
            self.exploration.load_state(state["exploration"])
        self.waiting = OrderedDict()
        for fields, reward, at in state.get("waiting", ()):
            step = Step(**fields)
            self.waiting[str(step.session)] = (step, float(reward), int(at))
        self.index.restore(state["tools"], state["descriptions"], np.asarray(state["active"], dtype=np.int64).tolist())
        self.latency.grow(len(self.index.tools))

    def nbytes(self) -> int:
        """Memory of the learned numeric state (policy arrays), in bytes."""
        return int(self.policy.nbytes())
