"""Leave one catalogue out (bench/unanswerable.py --loco): does "nothing fits" carry to a catalogue not fitted on?

For each catalogue T, `FitConfig` (its own model and `DomainFit`) is fitted on the calibration splits
of every other catalogue, and `FitConfig.learned` on the other learned sets' fitting rows with it;
T's test split is judged by the rule rl/fit.py applies, read from each row's numbers (the rows hold
what a decision reads: cosine, coverage, disagreement, near, p_agent, kinds, coherence).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import unanswerable_learned as learned
from unanswerable_fitting import Judged, fit, logistic

from toolwise.rl.fit import FitConfig, Relevance, learned_unfit_probability, zero_shot_unfit


def zero_shot_rule(config: FitConfig) -> Callable[[Any], bool]:
    return lambda r: zero_shot_unfit(Relevance(r.cosine, r.coverage, r.disagreement), config)


def learned_rule(config: FitConfig) -> Callable[[learned.LearnedRow], bool]:
    """`nothing_fits` of rl/fit.py on a learned row."""
    fit_ = config.learned

    def rule(r: learned.LearnedRow) -> bool:
        relevance = Relevance(r.cosine, r.coverage, r.disagreement)
        if r.kinds >= fit_.min_kinds and r.coherence >= fit_.min_coherence:
            return learned_unfit_probability(relevance, r.near, fit_, r.agent) > fit_.threshold
        return zero_shot_unfit(relevance, config, r.kinds > 0)

    return rule


def leave_one_out(
    zero_shot_rows: Mapping[str, Sequence[Any]],
    learned_rows: dict[str, tuple[list[learned.LearnedRow], list[learned.LearnedRow]]],
    learned_sets: Sequence[str],
    show: Callable[[str, Sequence[Judged], dict[str, Callable[[Any], bool]]], None],
) -> None:
    """Print, for each catalogue, toolwise zero-shot and learned fitted without it (`show`: a set's table)."""
    for target, rows in zero_shot_rows.items():
        others = [name for name in zero_shot_rows if name != target]
        config = fit([[r for r in zero_shot_rows[name] if r.calibration] for name in others])
        test = [r for r in rows if not r.calibration]
        show(f"{target}, zero-shot, fitted on {', '.join(others)}", test, {"toolwise": zero_shot_rule(config)})
        fitted_on = [name for name in learned_sets if name != target]
        if target not in learned_rows or target not in learned_sets:
            continue
        config = replace(config, learned=learned.fit_learned([learned_rows[n][0] for n in fitted_on], config, logistic))
        show(
            f"{target}, after learning, fitted on {', '.join(fitted_on)}",
            learned_rows[target][1],
            {"toolwise": learned_rule(config)},
        )
