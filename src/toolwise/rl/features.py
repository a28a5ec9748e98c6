"""What a policy reads about each tool for one request: the prior (how well the query matches the
tool, raised to what is known to work right after the last tool) and the choice model's feature rows.

A tool whose annotations say it changes things (it writes, or destroys) keeps only part of its text
relevance until calls of it have worked (`caution`): the words of a request alone are weak evidence,
and "stage my changes" reads much like "unstage all staged changes". The part it gives up is larger
for a request that reads as a question or asks to see something; none for a request that asks to act
and names the verb the tool's description opens with ("switch to develop", "Switches branches").
Where the catalogue says which tools change things, a tool that only reads gives up part for a request
that asks to act ("start a bugfix branch off main" is not for "List Git branches"), none for one that reads.

Both are read from the tool index and the sequence model, which learn elsewhere; this module only
combines them, so a policy sees one number (or one row) a tool.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from toolwise.rl.ids import in_order
from toolwise.rl.policies.base import FEATURES
from toolwise.rl.sequences import SequenceModel
from toolwise.rl.toolindex import ToolIndex

EVIDENCE = 3.0  # worked calls of a tool that halve its caution
READING = 2.2  # the caution is this many times larger for a request that asks to read
# A request that opens with a question word or a verb of looking, or ends with "?", asks to read; but one
# put as a polite question ("can you commit this?", "could you please switch to develop?") asks for what its
# verb says: to read only if that is a verb of looking ("can you show me the log?"). "Compare my branch with
# main" and "search the log" read as "show me the log" does.
_LOOKING = (
    r"show|list|get|find|display|view|see|tell|print|check|compare|look|read|inspect|describe|explain|count|search"
)
_READS = re.compile(
    rf"^\s*(what|what's|whats|which|who|whose|when|where|why|is|are|was|were|does|did|has|have|{_LOOKING})\b|\?\s*$",
    re.IGNORECASE,
)
# What may stand between "can you" and its verb: "would you mind showing", "can you quickly show", "would you be
# able to show" ask for that verb as "can you show" does.
_SOFTENING = r"(?:please|kindly|just|also|quickly|maybe|mind|be\s+able\s+to)\s+"
_ASKING = re.compile(
    rf"\s*(?:please\s+|(?:can|could|would|will)\s+you\s+(?:{_SOFTENING})*|help\s+me\s+(?:to\s+)?)+", re.IGNORECASE
)
_LOOKS = re.compile(rf"(?:{_LOOKING})(?:ing)?\b|getting\b", re.IGNORECASE)  # "would you mind showing …"


def asks_to_read(query: str | None) -> bool:
    if not query:
        return False
    asking = _ASKING.match(query)
    if asking is not None:
        return _LOOKS.match(query, asking.end()) is not None
    return _READS.search(query) is not None


class Features:
    def __init__(self, index: ToolIndex, sequences: SequenceModel, sequences_enabled: bool = True) -> None:
        self.index = index
        self.sequences = sequences
        self.sequences_enabled = sequences_enabled
        self._unigram_memo: tuple[dict[str, float], NDArray[np.float64]] | None = None
        # (unigram array, arms, listed tools, their column): `_unigram_column`
        self._column_memo: tuple[NDArray[np.float64], NDArray[np.int64], int, NDArray[np.float64]] | None = None

    def prior(self, query: str | None, previous_tool: str | None) -> NDArray[np.float64]:
        """Relevance of every known tool in [0, 1]: the index's match with the query (semantic and
        BM25, or BM25 alone), raised to what the sequence model knows works right after `previous_tool`;
        0 for a tool with no document (interned since, by a learned call of a tool the catalogue does not list)."""
        scores = self.index.scores(query)  # may be read-only (cached): copied before raising
        cautious = self.index.cautious
        if len(cautious):
            scores = scores.copy()
            scores[cautious] *= self.kept(query, cautious)
        follow = self.sequences.follow_scores(previous_tool) if previous_tool is not None else {}
        if follow:
            scores = scores.copy()
            for tool, score in follow.items():
                arm = self.index.tools.get(tool)
                if arm is not None and arm < len(scores):
                    scores[arm] = max(scores[arm], score)
        if len(scores) < len(self.index.tools):
            scores = np.concatenate([scores, np.zeros(len(self.index.tools) - len(scores))])
        return scores

    def prior_at(self, query: str | None, previous_tool: str | None, arms: NDArray[np.int64]) -> NDArray[np.float64]:
        """`prior(query, previous_tool).take(arms)`, the same numbers, computed for `arms` alone: a decision
        reports the relevance of its few recommendations, and scoring every tool for them was most of it."""
        scores = self.index.scores_at(query, arms)
        if len(self.index.cautious):
            at = np.flatnonzero(self.index.caution_of(arms))
            if len(at):
                scores[at] *= self.kept(query, arms.take(at))
        follow = self.sequences.follow_scores(previous_tool) if previous_tool is not None else {}
        for tool, score in follow.items():
            arm = self.index.tools.get(tool)
            if arm is not None and arm < len(self.index.lexical):
                for i in np.flatnonzero(arms == arm).tolist():
                    scores[i] = max(scores[i], score)
        return scores

    def prior_of(self, query: str | None, previous_tool: str | None, arm: int) -> float:
        """`prior(query, previous_tool)[arm]` (0 for a tool the catalogue does not list), without
        scoring every tool: what learning from one step needs."""
        score = self.index.score(query, arm)
        if self.index.caution_of(np.array([arm]))[0]:
            score *= float(self.kept(query, np.array([arm]))[0])
        follow = self.sequences.follow_score(previous_tool, self.index.tools.names[arm]) if previous_tool else None
        return score if follow is None else max(score, follow)

    def choice_rows(self, query: str | None, history: Sequence[str], arms: NDArray[np.int64]) -> NDArray[np.float64]:
        """The choice model's features of `arms` (see rl/policies/choice.py): cosine and BM25 of the
        query against each tool's document (BM25 alone in the first column without an embedder),
        log(1 + N·P(tool | history)) from the sequence model's back-off, and the same of the unigram
        distribution on a session's first call (history empty)."""
        rows = np.zeros((len(arms), len(FEATURES)))
        if query:
            self.text_columns(query, arms, rows[:, :2])
        if self.sequences_enabled:
            rows[:, 2 if history else 3] = self.sequence_column(history, arms)
        if history:
            rows[:, 4] = self.index.repeat_column(history, arms)
        return rows

    def text_columns(
        self, query: str, arms: NDArray[np.int64], out: NDArray[np.float64] | None = None
    ) -> NDArray[np.float64]:
        """The index's cosine and BM25 columns of `arms` (`ToolIndex.text_columns`, into `out` if given), with
        the caution of the tools that change things: the choice model's first two features."""
        columns = self.index.text_columns(query, arms, out)
        if not len(self.index.cautious):  # no tool of the catalogue changes things (or none says so)
            return columns
        at = np.flatnonzero(self.index.caution_of(arms))
        if len(at):
            columns[at] *= self.kept(query, arms.take(at))[:, None]
        return columns

    def kept(self, query: str | None, arms: NDArray[np.int64]) -> NDArray[np.float64]:
        """The share of their text relevance `arms` keep: 1 − c · k/(k + n), c their effect's CAUTION
        (READING times it, at most 0.9, for a request that asks to read; 0 for one that asks to act and
        names the tool's action, `ToolIndex.asks_for`; for one that asks to act, a tool that only reads gives
        up ACTING, one that destroys as much again), n the calls of each that worked (the sequence
        model's count), k = EVIDENCE: the caution lifts as calls of it work."""
        reads = asks_to_read(query)
        caution = self.index.caution_of(arms, acting=bool(query) and not reads) * (READING if reads else 1.0)
        if query and not reads and caution.any():  # asks to act, for what the tool says it does: caution lifted
            caution[self.index.asks_for(query, arms)] = 0.0
        unigrams, names = self.sequences.unigrams, self.index.tools.names
        worked = np.array([s.successes if (s := unigrams.get(names[a])) else 0 for a in arms.tolist()], dtype=float)
        kept: NDArray[np.float64] = 1.0 - np.minimum(caution, 0.9) * EVIDENCE / (EVIDENCE + worked)
        return kept

    def sequence_column(self, history: Sequence[str], arms: NDArray[np.int64]) -> NDArray[np.float64]:
        """log(1 + N·P(arm | history)) for each of `arms` (0 before anything worked)."""
        unigram, levels = self.sequences.backoff(history)
        if not levels:  # the unigram distribution alone (a session's first call): the same column while it stands
            return self._unigram_column(self._unigram_array(unigram), arms)
        probability = self._backed_off(unigram, levels).take(np.minimum(arms, len(self.index.tools)))
        column: NDArray[np.float64] = np.log1p(len(self.index.active) * probability)
        return column

    def sequence_columns(self, histories: Sequence[Sequence[str]], arms: NDArray[np.int64]) -> NDArray[np.float64]:
        """`sequence_column` of each of `histories`, one row each (a run's distinct histories): `_backed_off`'s
        arithmetic on all rows at once, level by level (the same numbers as one history at a time)."""
        tools = self.index.tools
        parts = self.sequences.backoffs(histories)
        unigrams = {id(unigram) for unigram, _ in parts}
        if len(unigrams) > 1:  # the unigrams changed between the histories (they do not within a run): one by one
            out = np.stack([self._backed_off(*part) for part in parts]) if parts else np.zeros((0, len(tools) + 1))
        else:
            unigram = self._unigram_array(parts[0][0]) if parts else np.zeros(len(tools) + 1)
            out = np.tile(unigram, (len(parts), 1))
            live = unigram != 0  # the tools whose column can be other than 0: P > 0 somewhere
            for level in range(max((len(levels) for _, levels in parts), default=0)):
                rows = [row for row, (_, levels) in enumerate(parts) if len(levels) > level]
                out[rows] *= np.array([parts[row][1][level][0] for row in rows])[:, None]
                shares = [parts[row][1][level][1] for row in rows]
                owners = np.repeat(rows, [len(share) for share in shares])
                ids = tools.ids([tool for share in shares for tool in share], missing=len(tools))
                values = np.fromiter((v for share in shares for v in share.values()), dtype=np.float64, count=len(ids))
                out[owners, ids] += values
                live[ids] = True
            return self._log_columns(out, arms, live)
        return self._log_columns(out, arms, None)

    def _log_columns(
        self, out: NDArray[np.float64], arms: NDArray[np.int64], live: NDArray[np.bool_] | None
    ) -> NDArray[np.float64]:
        """log(1 + N·P) of `arms`' columns of `out` (P by tool id, a row a history), in place where it can be.
        `live`: the ids whose P may be other than 0 (None: any); the others' columns are 0 and stay so (log 1 = 0),
        so the logarithm (most of the work: a run's histories × the catalogue) is taken of the live ones alone."""
        tools = self.index.tools
        # every tool in id order (a run over the catalogue): their columns in place, the unknown one's left out
        every = len(arms) == len(tools) and in_order(arms)
        ids = None if every else np.minimum(arms, len(tools))
        columns = out[:, : len(tools)] if ids is None else out.take(ids, 1)
        if live is not None:
            at = np.flatnonzero(live[: len(tools)] if ids is None else live.take(ids))
            if 2 * len(at) < columns.shape[1]:
                part = columns.take(at, 1)
                part *= len(self.index.active)
                columns[:, at] = np.log1p(part, out=part)
                return columns
        columns *= len(self.index.active)
        return np.log1p(columns, out=columns)

    def _backed_off(
        self, unigram: dict[str, float], levels: list[tuple[float, dict[str, float]]]
    ) -> NDArray[np.float64]:
        """P(next | history) by tool id: `next_distribution`'s arithmetic over an array, in the same order
        (the unigram array itself, read-only, where no longer prefix was seen)."""
        tools = self.index.tools
        probability = self._unigram_array(unigram)
        if levels:
            probability = probability.copy()
        for keep, shares in levels:
            probability *= keep
            ids = np.array(tools.ids(shares, missing=len(tools)), dtype=np.int64)
            probability[ids] += np.fromiter(shares.values(), dtype=np.float64, count=len(shares))
        return probability

    def _unigram_column(self, probability: NDArray[np.float64], arms: NDArray[np.int64]) -> NDArray[np.float64]:
        """`sequence_column` of `arms` from the unigram P alone (read-only), kept while the unigram array,
        `arms` (the listed tools, as a decision passes them) and the number of listed tools stay."""
        memo, active = self._column_memo, len(self.index.active)
        if memo is not None and memo[0] is probability and memo[1] is arms and memo[2] == active:
            return memo[3]
        column = np.log1p(active * probability.take(np.minimum(arms, len(probability) - 1)))
        column.setflags(write=False)
        self._column_memo = (probability, arms, active, column)
        return column

    def _unigram_array(self, unigram: dict[str, float]) -> NDArray[np.float64]:
        """The unigram P by tool id (the last slot takes tools never interned), kept while the sequence
        model hands out the same dict and no tool was interned: a run reads it for each of its histories."""
        tools = self.index.tools
        memo = self._unigram_memo
        if memo is not None and memo[0] is unigram and len(memo[1]) == len(tools) + 1:
            return memo[1]
        probability = np.zeros(len(tools) + 1)
        ids = np.array(tools.ids(unigram, missing=len(tools)), dtype=np.int64)
        probability[ids] = np.fromiter(unigram.values(), dtype=np.float64, count=len(unigram))
        probability.setflags(write=False)
        self._unigram_memo = (unigram, probability)
        return probability
