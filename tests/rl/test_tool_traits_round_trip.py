"""What the prior reads of a tool besides its document, its effect (the server's annotations: a tool that
destroys is not first on words alone) and the verb its description opens with, is kept for a tool that left
the catalogue: a snapshot saved and loaded (a restart) ranks it as the learner that saved it did, when a
request names it, and when it comes back listed without annotations."""

from __future__ import annotations

import numpy as np

from toolwise.rl import Learner, LearnerConfig
from toolwise.rl.state import pack, unpack
from toolwise.rl.toolindex import ToolDoc

DELETE = ToolDoc("fs__delete_file", "Deletes a file for good", effect="destroys", action="delet")
LISTED = [
    ToolDoc("fs__read_file", "Read the contents of a file", effect="reads"),
    ToolDoc("fs__move_file", "Move or rename a file", effect="writes"),
]
QUERY = "delete the file old.txt"


def _ranked(learner: Learner, candidates: list[str] | None = None) -> list[tuple[str, float]]:
    decision = learner.recommend(QUERY, np.random.default_rng(1), candidates=candidates)
    return [(r.tool, r.score) for r in decision.ranked]


def test_a_tool_no_longer_listed_keeps_its_effect_and_verb_across_a_snapshot() -> None:
    learner = Learner(LearnerConfig(), [DELETE, *LISTED])
    learner.set_tools(LISTED)  # the delete tool left its server's catalogue
    copy = Learner(LearnerConfig(), [])
    copy.load_state(unpack(pack(learner.state_dict())))
    copy.set_tools(LISTED)  # the running catalogue, as a restart gives it
    named = [DELETE.name, *(t.name for t in LISTED)]
    assert _ranked(copy, named) == _ranked(learner, named)
    back = [ToolDoc(DELETE.name, DELETE.description), *LISTED]  # listed again, its annotations not sent this time
    learner.set_tools(back)
    copy.set_tools(back)
    assert _ranked(copy) == _ranked(learner)
