"""A tool's description and a request meet on the same word for the same action."""

from __future__ import annotations

from toolwise.rl.text import action_word, stem


def test_a_descriptions_verb_and_a_requests_verb_are_the_same_word() -> None:
    pairs = [("Switches", "switch"), ("Creates", "create"), ("Copies", "copy"), ("Pushes", "push"), ("List", "list")]
    assert [stem(said) for said, _ in pairs] == [asked for _, asked in pairs]
    assert [stem(w) for w in ("status", "address", "is", "focus")] == ["status", "address", "is", "focus"]


def test_a_tool_says_what_it_does_with_the_word_its_description_opens_with() -> None:
    assert action_word("Unstages all staged changes") == "unstage"
    assert action_word("  -- Records changes to the repository") == "record"
    assert action_word("") == ""


def test_a_description_that_opens_with_a_label_says_what_the_tool_does_after_it() -> None:
    """ "Branch management: …" names a subject, not an action: a request naming the branch is not asking for it."""
    assert action_word("Branch management: create, list or delete branches") == "create"
    assert action_word("Shows the contents of a file given as <revision>:<path>") == "show"
