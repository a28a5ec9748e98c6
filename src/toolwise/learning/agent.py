"""What agents ask of the learning, beside the calls they make: a recommendation (a decision the
calls that follow it are attributed to), argument values that worked, a rating of a call, the end of a
session. The calls themselves are noted and learned on the hot path by `LearningService`; these ask
it to drain first, so they see every call made before them.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import replace
from datetime import datetime
from typing import Any

from toolwise.errors import UserError
from toolwise.feedback import OUTCOMES, Episode, Execution, FeedbackError, InvalidOutcomeError, Outcome, utcnow
from toolwise.feedback.records import one_request
from toolwise.learning.service import LearningService, with_session_query
from toolwise.learning.sessions import Session, owns, step_of
from toolwise.rl import Decision, Learner
from toolwise.rl.arguments import Suggestion
from toolwise.rl.memo import Memo

log = logging.getLogger(__name__)

# What a request whose session is its own is told: there is no earlier call in it to rate or end.
ALONE = "this request is a session of its own (it came on no connection, as an HTTP request of 2026-07-28 does)"


class NothingToRateError(FeedbackError, UserError):
    pass


def _log_failure(task: asyncio.Future[Any]) -> None:
    """For work that outlived its caller: its failure is logged, not lost."""
    if not task.cancelled() and task.exception() is not None:
        log.error("work whose caller went away failed", exc_info=task.exception())


class Agent:
    """The agent's side of the learning (the handlers of server/tools.py's registry call it)."""

    def __init__(self, learning: LearningService) -> None:
        self.learning = learning
        self._ending: dict[str, asyncio.Future[Episode]] = {}  # session → its end under way
        # Bounded as the open sessions are: a session never ended again, a rating never tried again, is forgotten.
        self._unrecorded: Memo[str, Episode] = Memo(learning.sessions.limit)  # session → its end learned, unrecorded
        # (execution, rating, comment) → the time of a rating whose try failed: a retry finds that try's row
        self._unrated: Memo[tuple[str, int, str | None], datetime] = Memo(learning.sessions.limit)
        # execution → the latest of its ratings whose reward its session's record holds (`_rate`)
        self._rated: Memo[str, int] = Memo(learning.sessions.limit)
        # session → (outcome, end) of its recorded episode: a second end is told it ended, not that it has no calls
        self._episodes: Memo[str, tuple[str, datetime]] = Memo(learning.sessions.limit)

    async def recommend(
        self, session: Session, query: str, top_k: int, candidates: list[str] | None, *, named_first: bool = False
    ) -> Decision:
        """Rank the tools for `query` in `session`, and open the decision the calls after it follow."""
        decision, _ = await self.recommend_with_arguments(session, query, top_k, candidates, named_first=named_first)
        return decision

    async def recommend_with_arguments(
        self,
        session: Session,
        query: str,
        top_k: int,
        candidates: list[str] | None,
        *,
        named_first: bool = False,
        suggest: int = 0,
    ) -> tuple[Decision, dict[str, list[Suggestion]]]:
        """`recommend`, and the argument values that worked for its first `suggest` tools (`suggestions`),
        read together: one wait for the lock at most. The decision is opened once both are back, so a
        caller that goes away meanwhile, or a session ended meanwhile, leaves no decision open for calls to follow."""
        learning = self.learning
        if candidates is not None and not candidates:  # the caller's to fix, not a bug
            raise UserError("candidates is empty: name at least one tool, or leave it out for every listed tool")
        if candidates is None and len(learning.learner.index.active) == 0:
            raise UserError("there are no tools to choose from: no downstream lists a tool (yet)")
        # An agent passes its user's message verbatim; a long one (pasted data) keeps its head, which
        # states the task, so that memory and the stored row stay bounded.
        query = query[: learning.settings.max_query_chars]
        blocked = self.shielded(candidates)
        previous, position = session.previous_tool, session.length  # as the session is now, not once read
        history = session.recent(session.length, learning.history_n)
        tried = session.tried_for(query)
        baseline = learning.settings.shadow or learning.catching_up

        def decide(learner: Learner) -> tuple[Decision, dict[str, list[Suggestion]]]:
            decision = learner.recommend(
                query,
                learning.state.rng,
                previous_tool=previous,
                position=position,
                candidates=candidates,
                top_k=top_k,
                exclude=blocked.keys(),
                baseline=baseline,
                named_first=named_first,
                history=history,
                tried=tried,
            )
            tools = [r.tool for r in decision.ranked[:suggest]]
            return decision, self._suggestions(learner, tools, query, session.owner)

        # midway: it reads the model and draws from the rng, nothing a run holds apart (`LearningThread.answer_midway`)
        decision, suggested = await learning.read_learned(decide, midway=True)
        session.recommended(query, decision)
        if learning.sessions.find(session.id) is session:  # not ended while it waited for the lock (`_close`)
            learning.open_decisions.add(session.connection or session.id, decision, session.id, query)
        learning.state.decided(decision.explored)
        return decision, suggested

    def shielded(self, candidates: list[str] | None) -> dict[str, str]:
        """The tools a recommendation among `candidates` (None: the listed tools) leaves out now, with why:
        those a shield blocks (their downstream failing or slow), unless that would leave nothing."""
        blocked = self.learning.shields.blocked(time.monotonic())
        if candidates is not None:  # tools asked for by name are dropped only if something remains
            return {} if all(c in blocked for c in candidates) else blocked
        return {} if len(blocked) >= len(self.learning.learner.index.active) else blocked

    def _suggestions(
        self, learner: Learner, tools: list[str], query: str, owner: str | None
    ) -> dict[str, list[Suggestion]]:
        """Values `tools`' successful calls (by `owner`, unless `share_arguments`) used for requests like
        `query` (none without stored arguments or an embedding). The caller holds the lock."""
        learning = self.learning
        semantic = learner.index.semantic
        if not tools or not learning.settings.store_arguments or semantic is None:
            return {}
        asked = semantic.query(query)
        return {tool: learning.arguments.suggest(learning.argument_key(owner, tool), asked) for tool in tools}

    async def rate(
        self, session: Session, rating: int, execution_id: str | None, tool: str | None, comment: str | None
    ) -> tuple[Execution, float]:
        """Store a 1..5 rating and learn from it; returns the execution and its new reward. `tool` with an
        `execution_id`: the tool the caller means, refused when the call is another's."""
        await self.learning.drain()
        if execution_id is not None and (session.owner is not None or tool is not None):
            await self._own_call(session.owner, execution_id, tool)
        if execution_id is None:
            call = session.latest(tool)
            if call is None and one_request(session.id):
                raise NothingToRateError(
                    f"{ALONE}, with no call to rate: pass execution_id (from the call's "
                    "_meta['toolwise/execution_id']), the tool called, or the session_id your calls named"
                )
            if call is None:
                what = f"no call of {tool!r}" if tool else "no call"
                raise NothingToRateError(
                    f"{what} in session {session.id!r} to rate; pass execution_id (from the call's "
                    "_meta['toolwise/execution_id']) or the tool of a call made in this session"
                )
            execution_id = call.id
            await self.learning.drain()  # it may have been noted while the drain above ran: recorded first
        # Once committed, a rating must also be learned and its reward stored (another run's sync skips
        # this instance's ratings as learned live): a caller that goes away does not cut that short.
        work = asyncio.ensure_future(self._rate(session, execution_id, rating, comment))
        self.learning.finish_before_close(work, f"the rating {rating} of call {execution_id}")
        try:
            return await asyncio.shield(work)
        except asyncio.CancelledError:
            work.add_done_callback(_log_failure)
            raise

    async def _own_call(self, owner: str | None, execution_id: str, tool: str | None) -> None:
        """Refuse a rating of a call another client made (unknown and foreign ids alike: which calls
        exist is not another client's business), or of a call of another tool than the `tool` named."""
        found = await self.learning.feedback.reads.get_execution(execution_id)
        if found is None or not owns(owner, found.session_id):
            raise NothingToRateError(
                f"no call with execution_id {execution_id!r} made by this client to rate: a client rates only "
                "its own calls (the _meta['toolwise/execution_id'] its call returned)"
            )
        if tool is not None and found.tool != tool:
            raise NothingToRateError(
                f"execution_id {execution_id!r} is a call of {found.tool!r}, not of {tool!r}: pass the "
                "execution_id of a call of that tool, or the tool alone to rate its newest call"
            )

    async def _rate(
        self, session: Session, execution_id: str, rating: int, comment: str | None
    ) -> tuple[Execution, float]:
        """A rating whose try failed keeps its time for the retry (`_unrated`): a try that committed though
        it reported an error is found by it, so the retry neither stores nor learns the rating again."""
        learning, n = self.learning, self.learning.history_n
        writes = learning.feedback.log
        tried = (execution_id, rating, comment)
        created_at = self._unrated.pop(tried)
        retried = created_at is not None
        created_at = self._unrated.put(tried, created_at or utcnow())
        event = await writes.add_rating(
            execution_id,
            rating,
            comment,
            instance=learning.instance_id,
            created_at=created_at,
            retried=retried,
            rerate=learning.learner.rerated,  # the reward moves with the rating, in its commit
            unrated=lambda e: learning.learner.reward_of(step_of(e, (), n)),  # a cancelled call's, to move
        )
        rating_id = event.rating.id
        assert rating_id is not None  # committed
        execution = await with_session_query(learning.feedback, event.execution, learning.namespace)
        mine = execution.session_id == session.id
        history = session.recent(execution.position, n) if mine else ()
        after_failure = mine and session.failed_before(execution.position)
        step = step_of(execution, history, n, rating=rating, after_failure=after_failure)

        def learn_rating(learner: Learner) -> float:
            """Learned and marked as learned in one hold of the lock: a snapshot never counts it learned before
            it is, and a task cut short before this leaves it to a sync, unmarked (learned once either way)."""
            marks = learning.covered.ratings  # the state's as it is now: a restore meanwhile replaced them
            previous_reward = learner.reward_before_rating(step, execution.reward, event.rewarded, event.previous)
            if not marks.fresh(rating_id):  # a sync learned it meanwhile, or the state restored counts it in
                return learner.rerated(previous_reward, rating, event.previous)
            if learning.settings.learning:
                reward = learner.observe_rating(step, learning.state.rng, previous_reward, event.previous).reward
            else:
                reward = learner.rerated(previous_reward, rating, event.previous)
            marks.add(rating_id)
            return reward

        reward = await learning.read_learned(learn_rating)
        call = session.find(execution.id) if execution.session_id == session.id else None
        # Not over a later rating's: two ratings at once of a call finish in either order (the earlier one's
        # rater may be done after the later one's); the session's total and the end of its episode take the
        # latest's reward, as the log does.
        if call is not None and rating_id > (self._rated.get(execution.id) or 0):
            self._rated.put(execution.id, rating_id)
            session.rewarded(reward - (call.reward or 0.0))
            call.learned(reward)
        self._unrated.pop(tried)
        return execution, reward

    async def end_session(self, session_id: str, outcome: Outcome, *, shown: str | None = None) -> Episode:
        """Store the session's episode (and teach a TD learner its last step was the last); `shown` is
        the session's name as its client gave it, for the error if it has no calls. The session ends
        once its episode is recorded: one the database refused (its error raised) is still open, and a
        retry ends it (its end learned once). An end under way is not cut short by its caller going
        away, and a second end of the session meanwhile answers with it."""
        if outcome not in OUTCOMES:
            raise InvalidOutcomeError(outcome)
        learning = self.learning
        await learning.drain()
        ending = self._ending.get(session_id)
        if ending is None:
            session = learning.sessions.find(session_id)
            if session is None or not session.length:
                self._close(session_id)
                raise UserError(self._nothing_to_end(session_id, shown if shown is not None else session_id))
            ending = self._ending[session_id] = asyncio.ensure_future(self._end(session, outcome))
            learning.finish_before_close(ending, f"the end of session {session_id!r}")
            ending.add_done_callback(lambda done: self._ended(session_id, done))
        try:
            return await asyncio.shield(ending)
        except asyncio.CancelledError:
            ending.add_done_callback(_log_failure)
            raise

    def _nothing_to_end(self, session_id: str, name: str) -> str:
        """Why the session `name` has no calls to end: it ended (and none came since), it is this request's
        own, or it is unknown to this client (another's sessions are not told apart from unknown ones)."""
        if (ended := self._episodes.get(session_id)) is not None:
            outcome, at = ended
            return (
                f"session {name!r} already ended ({outcome} at {at:%H:%M:%S} UTC); "
                "a call in it after that starts it anew"
            )
        if one_request(session_id):
            return (
                f"{ALONE}, with no calls to end: pass the session_id your calls named "
                "(session_id, or _meta['toolwise/session_id'] on a call)"
            )
        return f"session {name!r} has no calls to end (a client ends only its own sessions)"

    def _ended(self, session_id: str, ending: asyncio.Future[Episode]) -> None:
        if self._ending.get(session_id) is ending:
            del self._ending[session_id]

    def _close(self, session_id: str) -> None:
        """The session is over: forgotten, with what would attribute calls to it."""
        learning = self.learning
        learning.sessions.pop(session_id)
        learning.sessions.unname(session_id)
        learning.open_decisions.forget_session(session_id)

    async def _end(self, session: Session, outcome: Outcome) -> Episode:
        """Learn the session's end, then record its episode, then close it. An end learned and not recorded
        keeps its episode's id for the retry (`_unrecorded`): `_end_episode` learns an id once per state."""
        learning = self.learning
        last = session.calls[-1]
        # A call of the session noted while `end_session` drained (a parallel call) may be its last: learned
        # and recorded first, so its end is learned after it, with its reward, and counts it in the total.
        await learning.drain()
        episode = Episode(
            session_id=session.id,
            tools=list(session.tools),  # as it is now: the session's calls go on meanwhile
            total_reward=session.reward_total,
            outcome=outcome,
            started_at=session.started_at,
            ended_at=utcnow(),
            namespace=learning.namespace,
            instance=learning.instance_id,
            last_execution=last.id,
        )
        earlier = self._unrecorded.pop(session.id)
        if earlier is not None and earlier.last_execution == last.id:  # the same end, tried again
            episode = replace(episode, id=earlier.id)
        self._unrecorded.put(session.id, episode)
        await self._end_episode(session, last, episode.id)
        recorded = await learning.feedback.log.record_episode(episode)
        self._unrecorded.pop(session.id)
        self._episodes.put(session.id, (recorded.outcome, recorded.ended_at))
        self._close(session.id)
        return recorded

    async def _end_episode(self, session: Session, last: Execution, episode_id: str) -> None:
        """The session's last step was learned before anyone knew it was the last: a TD learner learns
        it again as terminal (no future term). Learned and marked as learned live (so a sync that reads
        the episode in the log does not learn it again) in one hold of the lock, once per learned state:
        a retry of an end whose recording failed learns nothing more, unless a restore replaced the state."""
        learning = self.learning
        step = step_of(last, session.recent(last.position, learning.history_n), learning.history_n)
        reward = last.reward

        def learn_end(learner: Learner) -> None:
            live = learning.covered.live  # the state's as it is now: a restore meanwhile replaced them
            if episode_id in live:
                return
            live.add(episode_id)
            if not learning.settings.learning:
                return
            try:
                if reward is None:  # the last call taught nothing (cancelled): a failure waiting before it ends here
                    learner.read_waiting(last.session_id, learning.state.rng)
                    return
                learner.end_episode(step, reward, learning.state.rng)
            except Exception:
                log.exception("learning the end of session %s failed; its episode is recorded", last.session_id)

        await learning.read_learned(learn_end)
