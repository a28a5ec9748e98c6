"""The learner: one object the server talks to. Pure computation; the caller passes the RNG.

It owns the tool ids, the lexical prior over the catalogue, the running mean latency per tool (for
the reward's speed bonus), the policy, the replay buffer and the sequence model.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np
from numpy.typing import NDArray

from toolwise.rl.batch import StepColumns, learn_batch, learn_columns
from toolwise.rl.context import Context, ContextEncoder
from toolwise.rl.embedding import Embedder, SemanticIndex, name_words
from toolwise.rl.exploration import Drift, Exploration, ExplorationConfig
from toolwise.rl.ids import Interner
from toolwise.rl.lexical import LexicalIndex
from toolwise.rl.names import NameIndex
from toolwise.rl.policies import POLICIES, PolicyConfig, make_policy
from toolwise.rl.policies.base import BatchPolicy, baseline_selection
from toolwise.rl.policies.choice import FEATURES, ChoiceModel
from toolwise.rl.policies.semantic import SemanticUCB
from toolwise.rl.replay import PrioritizedReplay
from toolwise.rl.reward import RewardWeights, compute_reward, normalise
from toolwise.rl.sequences import NextTool, SequenceModel

STATE_SCHEMA = 1
HEALTHY = 0.5  # a tool that broke counts as working again once half its recent calls work


class UnknownToolError(ValueError):
    def __init__(self, names: Iterable[str]) -> None:
        listed = ", ".join(sorted(names))
        super().__init__(f"unknown tool(s): {listed}")


@dataclass(frozen=True, slots=True)
class ToolDoc:
    name: str
    description: str = ""
    document: str = ""  # what the semantic prior embeds; defaults to the name's words and the description


@dataclass(frozen=True, slots=True)
class LearnerConfig:
    policy: str = "choice"
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

    def __post_init__(self) -> None:
        if self.policy not in POLICIES:
            raise ValueError(f"policy must be one of {sorted(POLICIES)}, got {self.policy!r}")
        if self.lexical_weight < 0:
            raise ValueError(f"lexical_weight must be ≥ 0, got {self.lexical_weight}")
        if self.replay_batch < 1 or self.replay_every < 1:
            raise ValueError(f"replay_batch and replay_every must be ≥ 1, got {self.replay_batch}, {self.replay_every}")


@dataclass(slots=True)
class Ranked:
    tool: str
    score: float
    expected: float  # expected normalised reward in [0, 1] (exploitation estimate)
    prior: float  # lexical relevance in [0, 1]


@dataclass(slots=True)
class Decision:
    decision_id: str
    policy: str
    context_hash: str
    chosen: str
    ranked: list[Ranked]
    explored: bool
    propensity: float


@dataclass(slots=True)
class Step:
    """One observed execution, in the context it was made."""

    tool: str
    success: bool
    latency_ms: float  # as every record of a call has it (the reward converts to seconds)
    query: str | None = None
    previous_tool: str | None = None
    position: int = 0
    history: Sequence[str] = ()
    rating: int | None = None
    terminal: bool = False
    passed_over: str | None = None  # the tool toolwise recommended for this call, when the agent called another


@dataclass(slots=True)
class Observation:
    reward: float
    normalised: float
    td_error: float
    context_hash: str


def _decision_id(rng: np.random.Generator) -> str:
    """A UUID4 drawn from `rng` (reproducible under a seed; 128 raw bits is ~10× cheaper than rng.bytes)."""
    high, low = rng.bit_generator.random_raw(2).tolist()
    high = (high & ~0xF000) | 0x4000  # version 4
    low = (low & ~(0xC000 << 48)) | (0x8000 << 48)  # RFC 4122 variant
    text = f"{high:016x}{low:016x}"
    return f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"


def worked(success: bool, rating: int | None) -> bool:
    """Success as sequences count it: the call succeeded and the user did not rate it 1 or 2."""
    return success and (rating is None or rating >= 3)


class Learner:
    def __init__(
        self, config: LearnerConfig | None = None, tools: Sequence[ToolDoc] = (), embedder: Embedder | None = None
    ) -> None:
        """`embedder` turns the prior semantic (tool documents and queries embedded); without one the
        prior is lexical (BM25)."""
        self.config = config or LearnerConfig()
        self.embedder = embedder
        self.tools = Interner()
        self.policy = make_policy(self.config.policy, self.config.policy_config)
        self.replay = PrioritizedReplay(self.config.replay_capacity, self.config.replay_alpha)
        self.sequences = SequenceModel(self.config.sequence_n, self.config.sequence_min_count)
        self.latency_mean = np.zeros(16)
        self.latency_count = np.zeros(16, dtype=np.int64)
        self.updates = 0
        self.reward_sum = 0.0
        self.descriptions: dict[str, str] = {}
        self.documents: dict[str, str] = {}
        self.index = LexicalIndex([])
        self.semantic: SemanticIndex | None = None
        self.exploration = Exploration(self.config.exploration)
        self.set_tools(tools)

    # -- catalogue ---------------------------------------------------------------------------------

    def set_tools(self, tools: Sequence[ToolDoc]) -> None:
        """The current catalogue. Ids are stable: a tool that disappears and returns keeps its learning."""
        for tool in tools:
            self.tools.intern(tool.name)
            self.descriptions[tool.name] = tool.description
            if tool.document or tool.name not in self.documents:  # a restored state's docs name no parameters
                self.documents[tool.name] = tool.document or f"{name_words(tool.name)}. {tool.description}"
        self.active = np.array([self.tools.intern(t.name) for t in tools], dtype=np.int64)
        self.names = NameIndex(self.tools.names)
        self._grow(len(self.tools))
        if self.embedder is not None:  # vectors of unchanged documents are kept, not recomputed
            known = self.semantic.by_document if self.semantic is not None else None
            texts = [self.documents.get(name, name_words(name)) for name in self.tools.names]
            self.semantic = SemanticIndex(self.embedder, texts, known)
            self.index = LexicalIndex(texts)
        else:
            documents = [f"{name.replace('__', ' ')} {self.descriptions.get(name, '')}" for name in self.tools.names]
            self.index = LexicalIndex(documents)

    @property
    def active_names(self) -> list[str]:
        return [self.tools.names[i] for i in self.active]

    def _grow(self, n: int) -> None:
        """Room for `n` tools in the per-tool latency arrays (doubling; new tools start at zero)."""
        extra = max(n, 2 * len(self.latency_mean)) - len(self.latency_mean) if n > len(self.latency_mean) else 0
        if extra:
            self.latency_mean = np.concatenate([self.latency_mean, np.zeros(extra)])
            self.latency_count = np.concatenate([self.latency_count, np.zeros(extra, dtype=np.int64)])

    def _arms(self, candidates: Iterable[str] | None) -> NDArray[np.int64]:
        if candidates is None:
            return self.active
        names = list(dict.fromkeys(candidates))
        unknown = [n for n in names if n not in self.tools]
        if unknown:
            raise UnknownToolError(unknown)
        return np.array([self.tools.intern(n) for n in names], dtype=np.int64)

    def encode(self, query: str | None, previous_tool: str | None, position: int) -> Context:
        """The context, with the query's embedding when the prior is semantic (embedded once per query)."""
        context = self.config.encoder.encode(query, previous_tool, position)
        if self.semantic is not None and context.embedding is None:
            # no query, nothing to learn over: the zero vector keeps the policy in the embedding's space
            context.embedding = self.semantic.query(query) if query else self.semantic.no_query
        return context

    # -- deciding ----------------------------------------------------------------------------------

    def prior(self, query: str | None, previous_tool: str | None) -> NDArray[np.float64]:
        """Relevance of every known tool in [0, 1]: semantic match with the query (cosine, plus BM25
        over the same documents weighted `lexical_weight`, rescaled), or BM25 alone without an embedder,
        raised to what the sequence model knows works right after `previous_tool`."""
        if self.semantic is not None and query:
            w = self.config.lexical_weight
            scores = self.semantic.scores(query) + w * self.index.scores(query)
            scores /= 1 + w
        else:
            scores = self.index.scores(query or "")  # read-only (cached): copied before raising
        follow = self.sequences.follow_scores(previous_tool) if previous_tool is not None else {}
        if follow:
            scores = scores.copy()
            for tool, score in follow.items():
                arm = self.tools.get(tool)
                if arm is not None and arm < len(scores):
                    scores[arm] = max(scores[arm], score)
        return scores

    def prior_of(self, query: str | None, previous_tool: str | None, arm: int) -> float:
        """`prior(query, previous_tool)[arm]` (0 for a tool the catalogue does not list), without
        scoring every tool: what learning from one step needs."""
        scores = self.index.scores(query or "") if self.semantic is None or not query else None
        if scores is None:
            assert self.semantic is not None and query
            if arm >= len(self.semantic):
                return 0.0
            w = self.config.lexical_weight
            score = (float(self.semantic.scores(query)[arm]) + w * float(self.index.scores(query)[arm])) / (1 + w)
        elif arm >= len(scores):
            return 0.0
        else:
            score = float(scores[arm])
        follow = self.sequences.follow_score(previous_tool, self.tools.names[arm]) if previous_tool else None
        return score if follow is None else max(score, follow)

    def choice_rows(self, query: str | None, history: Sequence[str], arms: NDArray[np.int64]) -> NDArray[np.float64]:
        """The choice model's features of `arms` (see rl/policies/choice.py): cosine and BM25 of the
        query against each tool's document (BM25 alone in the first column without an embedder),
        log(1 + N·P(tool | history)) from the sequence model's back-off, and the same of the unigram
        distribution on a session's first call (history empty)."""
        rows = np.zeros((len(arms), len(FEATURES)))
        if query:
            rows[:, :2] = self.text_columns(query, arms)
        if self.config.sequences_enabled:
            rows[:, 2 if history else 3] = self.sequence_column(history, arms)
        if history:
            rows[:, 4] = self.repeat_column(history, arms)
        return rows

    def repeat_column(self, history: Sequence[str], arms: NDArray[np.int64]) -> NDArray[np.float64]:
        """1 for each of `arms` the session already called (within `history`), else 0."""
        used = [arm for arm in self.tools.ids(history) if arm >= 0]
        return np.isin(arms, used).astype(np.float64)

    def text_columns(self, query: str, arms: NDArray[np.int64]) -> NDArray[np.float64]:
        """`choice_rows`' first two columns: the query's cosine and BM25 against each of `arms`."""
        columns = np.zeros((len(arms), 2))
        known = arms < len(self.index)
        lexical = self.index.scores(query).take(arms[known])
        if self.semantic is not None:
            columns[known, 0] = self.semantic.scores(query).take(arms[known])
            columns[known, 1] = lexical
        else:
            columns[known, 0] = lexical
        return columns

    def sequence_column(self, history: Sequence[str], arms: NDArray[np.int64]) -> NDArray[np.float64]:
        """log(1 + N·P(arm | history)) for each of `arms` (0 before anything worked)."""
        distribution = self.sequences.next_distribution(history)
        probability = np.zeros(len(self.tools) + 1)  # the last slot takes tools never interned
        ids = np.array(self.tools.ids(distribution, missing=len(self.tools)), dtype=np.int64)
        probability[ids] = np.fromiter(distribution.values(), dtype=np.float64, count=len(distribution))
        return np.log1p(len(self.active) * probability.take(np.minimum(arms, len(self.tools))))

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
        arms = self._arms(candidates)
        if exclude:
            dropped = [i for name in exclude if (i := self.tools.get(name)) is not None]
            arms = arms[~np.isin(arms, dropped)]
        if len(arms) == 0:
            raise ValueError("there are no tools to choose from")
        context = self.encode(query, previous_tool, position)
        prior_all = self.prior(query, previous_tool)
        named = self.names.named(query) if named_first and query else []
        if named:
            prior_all = prior_all.copy()  # the prior is read-only (memoised)
            prior_all[named] = 1.0
        if baseline:
            selection = baseline_selection(arms, prior_all.take(arms))
        elif isinstance(self.policy, ChoiceModel):
            rows = self.choice_rows(query, history or ((previous_tool,) if previous_tool else ()), arms)
            if named:
                rows[np.isin(arms, named), :2] = 1.0
            selection = self.policy.select(context, arms, rows, rng)
        else:
            selection = self.policy.select(context, arms, prior_all.take(arms), rng)
        if not baseline:
            selection = self.exploration.explore(selection, arms, top_k, rng, self.tools)
        names = self.tools.names
        top = selection.ranked[:top_k]
        ranked = [
            Ranked(names[a], s, e, p)
            for a, s, e, p in zip(
                top.tolist(),
                selection.scores[:top_k].tolist(),
                selection.expected[:top_k].tolist(),
                prior_all.take(top).tolist(),
                strict=True,
            )
        ]
        return Decision(
            decision_id=_decision_id(rng),
            policy="baseline" if baseline else self.policy.name,
            context_hash=context.hash,
            chosen=names[selection.chosen],
            ranked=ranked,
            explored=selection.explored,
            propensity=selection.propensity,
        )

    def recommend_next(
        self, recent_tools: Sequence[str], candidates: Iterable[str] | None = None, top_k: int = 5
    ) -> list[NextTool]:
        if not self.config.sequences_enabled:
            return []
        return self.sequences.recommend_next(recent_tools, candidates, top_k)

    def estimates(self, query: str | None, previous_tool: str | None, position: int) -> list[tuple[str, float, float]]:
        """(tool, expected normalised reward, prior) for every active tool, best first: what the
        policy has learned for a context, without exploration (for inspection)."""
        context = self.encode(query, previous_tool, position)
        prior = self.prior(query, previous_tool).take(self.active)
        if isinstance(self.policy, ChoiceModel):
            rows = self.choice_rows(query, (previous_tool,) if previous_tool else (), self.active)
            expected = self.policy.expected(context, self.active, rows)
        else:
            expected = self.policy.expected(context, self.active, prior)
        order = np.argsort(-expected, kind="stable")
        names = self.tools.names
        return [(names[self.active[i]], float(expected[i]), float(prior[i])) for i in order]

    # -- learning ----------------------------------------------------------------------------------

    def reward_of(self, step: Step) -> float:
        tool = self.tools.get(step.tool)
        mean = None
        if tool is not None and tool < len(self.latency_count) and self.latency_count[tool] > 0:
            mean = float(self.latency_mean[tool])
        return compute_reward(
            self.config.reward,
            success=step.success,
            latency_s=step.latency_ms / 1000,
            rating=step.rating,
            mean_latency_s=mean,
        )

    def learn(self, step: Step, rng: np.random.Generator, *, update: bool = True) -> Observation:
        """The server's one entry per step: the step's reward and context hash (what its record keeps),
        computed once, and with `update` the policy, replay, sequences and running latency learn from
        it (without, nothing changes: learning switched off still records rewards)."""
        context = self.encode(step.query, step.previous_tool, step.position)
        reward = self.reward_of(step)
        if not update:
            return Observation(reward, normalise(self.config.reward, reward), 0.0, context.hash)
        return self._observe(step, reward, rng, context)

    def end_episode(self, step: Step, reward: float, rng: np.random.Generator) -> Observation | None:
        """The session ended after `step` (already learned, with `reward` as it stands now): a TD policy
        learns its transition again as terminal, so ending there is not valued by a next context that
        never came; a bandit has no future term to drop and learns nothing (None)."""
        if not self.policy.uses_next_context:
            return None
        context = self.encode(step.query, step.previous_tool, step.position)
        return self._learn(replace(step, terminal=True), reward, rng, context)

    def observe(self, step: Step, rng: np.random.Generator, reward: float | None = None) -> Observation:
        """Learn from one execution: reward (computed unless given), policy update, replay, sequences,
        running latency."""
        reward = self.reward_of(step) if reward is None else reward
        return self._observe(step, reward, rng, self.encode(step.query, step.previous_tool, step.position))

    def _observe(self, step: Step, reward: float, rng: np.random.Generator, context: Context) -> Observation:
        observation = self._learn(step, reward, rng, context)
        self._watch(step.tool, observation.normalised, worked(step.success, step.rating))
        arm = self.tools.intern(step.tool)
        self._grow(len(self.tools))
        self.latency_count[arm] += 1
        self.latency_mean[arm] += (step.latency_ms / 1000 - self.latency_mean[arm]) / self.latency_count[arm]
        if self.config.sequences_enabled:
            self.sequences.observe_step(step.history, step.tool, reward, worked(step.success, step.rating))
        return observation

    def _watch(self, tool: str, normalised: float, ok: bool) -> Drift | None:
        """Feed the adaptive ε and the drift guard; a tool whose rewards changed is forgotten by the
        policy (its old evidence no longer describes it) and re-opened for exploration."""
        drift = self.exploration.observe(tool, normalised, ok, self.updates)
        arm = self.tools.get(tool)
        if arm is None:
            return drift
        if drift is not None and isinstance(self.policy, ChoiceModel | SemanticUCB):
            self.policy.forget(arm)
        if isinstance(self.policy, ChoiceModel) and (drift is not None or arm in self.policy.health):
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
        observation = self._learn(step, self.reward_of(step), rng, context)
        if self.config.sequences_enabled:
            success_delta = int(worked(step.success, step.rating)) - int(worked(step.success, previous_rating))
            self.sequences.revise(step.history, step.tool, observation.reward - previous_reward, success_delta)
        return observation

    def _learn(self, step: Step, reward: float, rng: np.random.Generator, context: Context) -> Observation:
        if isinstance(self.policy, ChoiceModel):
            return self._learn_choice(self.policy, step, reward, rng, context)
        arm = self.tools.intern(step.tool)
        future = self.policy.uses_next_context and not step.terminal
        next_context = self.encode(step.query, step.tool, step.position + 1) if future else None
        prior = self.prior_of(step.query, step.previous_tool, arm)
        scaled = normalise(self.config.reward, reward)
        update = self.policy.update(context, arm, scaled, next_context, prior)
        self.updates += 1
        self.reward_sum += reward
        if update.transition is not None and self.config.replay_enabled:
            self.replay.add(update.transition)
            if self.updates % self.config.replay_every == 0 and len(self.replay) >= self.config.replay_batch:
                batch = self.replay.sample(self.config.replay_batch, rng)
                self.replay.update_priorities(batch.slots, self.policy.replay(batch))
        return Observation(reward, scaled, update.td_error, context.hash)

    def _learn_choice(
        self, policy: ChoiceModel, step: Step, reward: float, rng: np.random.Generator, context: Context
    ) -> Observation:
        """An observed call as a choice among the catalogue (see rl/policies/choice.py), weighted by
        how well it went: the normalised reward if it worked, its shortfall if not."""
        arm = self.tools.intern(step.tool)
        arms = self.active if arm in self.active else np.append(self.active, arm)
        history = tuple(step.history) or ((step.previous_tool,) if step.previous_tool else ())
        rows = self.choice_rows(step.query, history, arms)
        scaled = normalise(self.config.reward, reward)
        ok = worked(step.success, step.rating)
        over = self.tools.get(step.passed_over) if step.passed_over else None
        before = policy.learn_choice(
            context,
            arms,
            rows,
            arm,
            worked=ok,
            weight=0.5 + 0.5 * (scaled if ok else 1 - scaled),
            passed_over=over,
            rng=rng,
        )
        self.updates += 1
        self.reward_sum += reward
        return Observation(reward, scaled, (1.0 if ok else 0.0) - before, context.hash)

    def learn_batch(self, steps: Sequence[Step], rng: np.random.Generator) -> int:
        """Learn a run of logged executions in order, as `observe` one by one would, in a fraction of
        the time (see `rl/batch.py`); the policy may settle what it learned when its state is next read."""
        return learn_batch(self, steps, rng)

    def learn_columns(self, steps: StepColumns, rng: np.random.Generator) -> int:
        """`learn_batch` of steps given as columns (a replay builds them from the log's columns)."""
        return learn_columns(self, steps, rng)

    def settle(self) -> None:
        """After a run of `learn_batch`: finish what the policy left pending (it settles by itself when
        read; this does it now, and frees what it kept between batches) and compact the n-grams the run
        built."""
        if isinstance(self.policy, BatchPolicy):
            self.policy.finish_batches()
        self.sequences.compact()

    def rebuild(self, steps: Iterable[Step], rng: np.random.Generator) -> int:
        """Replay an execution log in order (same log and seed → same state); returns steps applied."""
        count = 0
        for step in steps:
            self.observe(step, rng)
            count += 1
        return count

    # -- state -------------------------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        n = len(self.tools)
        return {
            "schema": STATE_SCHEMA,
            "config": {"policy": self.config.policy, "reward": asdict(self.config.reward)},
            "tools": list(self.tools.names),
            "descriptions": dict(self.descriptions),
            "active": self.active.copy(),
            "latency_mean": self.latency_mean[:n].copy(),
            "latency_count": self.latency_count[:n].copy(),
            "updates": self.updates,
            "reward_sum": self.reward_sum,
            "policy": self.policy.state_dict(),
            "replay": self.replay.state_dict(),
            "sequences": self.sequences.state_dict(),
            "exploration": self.exploration.state_dict(),
        }

    def load_state(self, state: dict[str, Any]) -> None:
        if state["schema"] != STATE_SCHEMA:
            raise ValueError(f"learner state schema {state['schema']} is not {STATE_SCHEMA}")
        if state["config"]["policy"] != self.config.policy:
            raise ValueError(
                f"state was learned by policy {state['config']['policy']!r}, this learner runs {self.config.policy!r}"
            )
        self.tools = Interner(state["tools"])
        self.descriptions = dict(state["descriptions"])
        n = len(self.tools)
        self.latency_mean, self.latency_count = np.zeros(max(16, n)), np.zeros(max(16, n), dtype=np.int64)
        self.latency_mean[:n] = state["latency_mean"]
        self.latency_count[:n] = state["latency_count"]
        self.updates, self.reward_sum = int(state["updates"]), float(state["reward_sum"])
        self.policy.load_state(state["policy"])
        self.replay.load_state(state["replay"])
        self.sequences.load_state(state["sequences"])
        if "exploration" in state:  # states saved before adaptive exploration start it afresh
            self.exploration.load_state(state["exploration"])
        active = [self.tools.names[i] for i in np.asarray(state["active"], dtype=np.int64)]
        self.set_tools([ToolDoc(name, self.descriptions.get(name, "")) for name in active])

    def nbytes(self) -> int:
        """Memory of the learned numeric state (policy arrays), in bytes."""
        return int(self.policy.nbytes())
