"""The demo's explanation says what happened: what the agent did, and for a pick still wrong, the figures
toolwise ranked it by (the outcome policy's estimates), not a guess at why."""

from __future__ import annotations

from typing import Any

from toolwise.cli.demo import corrections_in, explain
from toolwise.cli.demo_agent import INTENTS, Played

STATS = {"policy": "outcome"}


def ranked(tool: str, **figures: float) -> list[dict[str, Any]]:
    return [{"tool": tool, "confidence": 0.9, "p_agent": 0.9, "evidence": 3.0, **figures}]


def test_all_picks_right_says_what_the_agent_did_and_lists_nothing_wrong() -> None:
    played = Played(picks=[True, False, True], calls=4, corrections=1, ratings=4)
    text = explain({i.label: i.tool for i in INTENTS}, {i.label: ranked(i.tool) for i in INTENTS}, played, STATS)
    assert text.startswith(f"{len(INTENTS)} of {len(INTENTS)} picks right.")
    assert "called the right tool itself (1 times)" in text and "from all 4 calls and 4 ratings" in text
    assert "\n-" not in text


def test_a_wrong_pick_names_the_estimates_it_was_ranked_by() -> None:
    current = INTENTS[0]
    after = {i.label: ranked(i.tool) for i in INTENTS}
    after[current.label] = [
        {"tool": "time__convert_time", "confidence": 0.5, "p_agent": 0.61, "evidence": 3.7},
        {"tool": current.tool, "confidence": 0.9, "p_agent": 0.38, "evidence": 4.6},
    ]
    played = Played(picks=[True] * 4, calls=4, asked={current.label: 4}, right={current.label: 3})
    text = explain({i.label: i.tool for i in INTENTS}, after, played, STATS)
    line = next(line for line in text.splitlines() if line.startswith(f"- {current.label!r}"))
    assert "picked 3 of them" in line and "now time__convert_time" in line
    assert "predicted to call it (0.61)" in line and f"P(works) is 0.50, {current.tool} 0.90" in line


def test_a_learned_sequence_says_which_of_its_steps_were_the_agents_corrections() -> None:
    """toolwise counts "wrong pick rated 1, then the right tool" as a sequence that succeeded: the demo says so."""
    played = Played(corrected={("git__git_diff_unstaged", "git__git_status"): 11})
    note = corrections_in(["git__git_diff_unstaged", "git__git_status", "git__git_diff_unstaged"], played)
    assert note == "; git__git_diff_unstaged → git__git_status: the agent's correction of a pick rated 1, 11×"
    assert corrections_in(["git__git_status", "git__git_diff_unstaged"], played) == ""
