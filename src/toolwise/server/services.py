"""The running services, each with one job, in one small object: what the handlers of our tools
(registered in `server/tools.py`) and the admin commands are given."""

from __future__ import annotations

from dataclasses import dataclass

from toolwise.config import Settings
from toolwise.downstream.catalogue import Catalogue
from toolwise.feedback import FeedbackService
from toolwise.learning.agent import Agent
from toolwise.learning.metrics import Metrics
from toolwise.learning.service import LearningService
from toolwise.learning.sharing import Sharing
from toolwise.learning.snapshotting import Snapshotting


@dataclass(frozen=True, slots=True)
class Services:
    settings: Settings
    feedback: FeedbackService  # what happened: the execution log, ratings, episodes, snapshots
    catalogue: Catalogue  # the downstreams and their tools
    learning: LearningService  # note, record and learn the proxied calls; owns what was learned
    agent: Agent  # what agents ask: recommend, suggest arguments, rate, end sessions
    sharing: Sharing  # learn what other instances (and earlier runs) logged
    snapshots: Snapshotting  # save, load, restore, follow and choose snapshots of the learned state

    @classmethod
    def open(
        cls,
        settings: Settings,
        feedback: FeedbackService,
        catalogue: Catalogue | None = None,
        metrics: Metrics | None = None,
    ) -> Services:
        """The services over a started feedback store (no downstreams unless `catalogue` is given)."""
        learning = LearningService(settings, feedback, metrics)
        sharing = Sharing(settings, feedback, learning)
        return cls(
            settings,
            feedback,
            catalogue if catalogue is not None else Catalogue({}, settings),
            learning,
            Agent(learning),
            sharing,
            Snapshotting(settings, feedback, learning, sharing),
        )
