"""What the agent calls next, from the n-gram counts of tool sequences (`ngram_counts.py`: which tool
tends to follow the last one or two, an interpolated Witten-Bell estimate over the steps that worked).

The next call as the agent will make it (`recommend_next`) is the same estimate over every call, whether
it worked or not: after a failed call agents mostly retry it, which a model of the calls that worked
cannot predict. A failed last call is its own context: the steps that followed one are also counted
after the prefix with that tool marked failed (`failed`); "B worked" is B's counts less those, and
both back off to "B" (every call after B) before the calls at large. Each suggestion carries P(the
agent calls it) and P(it works) there.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from toolwise.rl.ngram_batch import BatchCounts
from toolwise.rl.ngrams import FAILED, WORKS_PRIOR, NextTool, NgramStats, failed

__all__ = ["NextTool", "SequenceModel"]


class SequenceModel(BatchCounts):
    """The n-gram counts (`NgramCounts`, `BatchCounts`) and what the agent calls next from them: every
    call counted, a failed last call a context of its own, backed off as the module's docstring says."""

    def _agent_contexts(self, history: Sequence[str], after_failure: bool) -> list[tuple[tuple[str, ...], bool]]:
        """The contexts of `agent_distribution`, shortest first, each a prefix of the table and whether it
        is read as the part of its counts that followed a call that worked (its counts less the marked
        prefix's). Once the last tool has been seen to fail, whether it failed is a context of its own
        either way, and back-off drops the oldest fact first: (A, B failed or worked) → (B failed or
        worked) → (B, every call) → every call. Before any failure of it, "it worked" adds nothing."""
        suffixes = [tuple(history[-length:]) for length in range(1, min(self.max_n - 1, len(history)) + 1)]
        if not suffixes or not self._nexts((failed(history[-1]),)):
            return [(prefix, False) for prefix in suffixes]  # no failure of it seen: all calls
        if after_failure:
            return [(suffixes[0], False)] + [((*prefix[:-1], failed(prefix[-1])), False) for prefix in suffixes]
        return [(suffixes[0], False)] + [(prefix, True) for prefix in suffixes]

    def _agent_counts(self, prefix: tuple[str, ...], worked_only: bool) -> dict[str, NgramStats]:
        return self._after_worked(prefix) if worked_only else self._nexts(prefix) or {}

    def _agent_levels(
        self, history: Sequence[str], after_failure: bool
    ) -> list[tuple[tuple[str, ...], dict[str, NgramStats]]]:
        """Each context of `agent_distribution` (shortest first) with the calls counted after it."""
        return [(p, self._agent_counts(p, worked)) for p, worked in self._agent_contexts(history, after_failure)]

    def agent_distribution(self, history: Sequence[str], after_failure: bool = False) -> dict[str, float]:
        """P(the agent's next call | its last calls, and whether the last one failed): interpolated
        Witten-Bell over every call (see the module's docstring); sums to 1 over the tools ever called."""
        return self._agent_probabilities(self._agent_levels(history, after_failure))

    def _agent_probabilities(self, levels: list[tuple[tuple[str, ...], dict[str, NgramStats]]]) -> dict[str, float]:
        probability = dict(self._called_probabilities())
        for _, counts in levels:
            called = {t: s.count for t, s in counts.items() if s.count > 0}
            if not called:
                continue
            total, types = sum(called.values()), len(called)
            keep = types / (total + types)
            for tool in probability:
                probability[tool] *= keep
            for tool, count in called.items():
                probability[tool] = probability.get(tool, 0.0) + count / (total + types)
        return probability

    def recommend_next(
        self,
        recent_tools: Sequence[str],
        candidates: Iterable[str] | None = None,
        top_k: int = 5,
        *,
        after_failure: bool = False,
    ) -> list[NextTool]:
        """The `top_k` calls the agent most probably makes next (`agent_distribution`; a retry of a failed
        last call included) among `candidates`, each with P(it works) there and the longest context it
        was seen after (none: it is just often called) with its counts."""
        levels = self._agent_levels(recent_tools, after_failure)
        probability = self._agent_probabilities(levels)
        if candidates is not None:
            allowed = set(candidates)
            probability = {t: p for t, p in probability.items() if t in allowed}
        best = sorted(probability.items(), key=lambda item: (-item[1], item[0]))[:top_k]
        return [self._explain(levels, tool, p) for tool, p in best]

    def _explain(
        self, levels: list[tuple[tuple[str, ...], dict[str, NgramStats]]], tool: str, probability: float
    ) -> NextTool:
        own = self.unigrams[tool]
        base = (own.successes + 1) / (own.count + 2)  # the tool's own success rate, Laplace-smoothed
        for prefix, counts in reversed(levels):
            s = counts.get(tool)
            if s is not None and s.count:
                shown = tuple(t.removesuffix(FAILED) for t in prefix)
                steps = [*shown[:-1], shown[-1] + (" (failed)" if prefix[-1].endswith(FAILED) else "")]
                reason = f"follows {' → '.join(steps)} → {tool} ({s.count}×, {s.success_rate:.0%} success)"
                works = (s.successes + WORKS_PRIOR * base) / (s.count + WORKS_PRIOR)
                return NextTool(
                    tool, probability, s.count, s.success_rate, s.mean_reward, shown, reason, probability, works
                )
        reason = f"often called ({own.count}×, {own.success_rate:.0%} success), never yet after these tools"
        return NextTool(tool, probability, own.count, own.success_rate, own.mean_reward, (), reason, probability, base)
