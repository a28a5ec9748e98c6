"""Errors a caller of the FeedbackService can act on; the server turns them into MCP `is_error` results."""

from __future__ import annotations

import math

from toolwise.errors import UserError


class FeedbackError(Exception):
    """Base class: something the caller asked for is not possible as asked."""


class UnknownExecutionError(FeedbackError, UserError):
    def __init__(self, execution_id: str) -> None:
        super().__init__(f"no execution with id {execution_id!r} has been recorded")
        self.execution_id = execution_id


class InvalidRatingError(FeedbackError, UserError):
    def __init__(self, rating: object) -> None:
        super().__init__(f"rating must be an integer from 1 to 5, got {rating!r}")
        self.rating = rating


class InvalidOutcomeError(FeedbackError, UserError):
    def __init__(self, outcome: object) -> None:
        super().__init__(f"outcome must be one of 'success', 'partial', 'failure', got {outcome!r}")
        self.outcome = outcome


class ServiceNotStartedError(FeedbackError):
    def __init__(self) -> None:
        super().__init__("FeedbackService is not running: call `await service.start()` (or use `async with`)")


class StoreUnavailableError(FeedbackError):
    """The database does not take records (full disk, lost connection, locked) within the bound."""


class DeadLetterError(FeedbackError):
    """A record the database refused could not be written to any dead-letter file either."""


class DatabaseUnusableError(FeedbackError):
    """The database cannot be opened or migrated (corrupt file, no permission, unreachable server)."""


class DatabaseFailedError(FeedbackError):
    """The database failed under work that had opened it: a damaged page, a full or failing disk, a lock
    held elsewhere, a lost server. The user's situation, not a bug: the message says what to do."""


def libpq_seconds(wait_s: float) -> int:
    """A wait as libpq's `connect_timeout` takes it (psycopg): whole seconds, 2 at least."""
    return max(2, math.ceil(wait_s))


def describe_database_error(exc: BaseException, *, waited_s: float | None = None) -> str:
    """A database error as a person reads it: the driver's own message, not the SQL around it. A
    driver's wait that ran out says only `TimeoutError` (asyncpg): `waited_s` names the wait it was;
    psycopg's says "connection timeout expired" after `libpq_seconds` of it."""
    orig = getattr(exc, "orig", None) or exc
    if isinstance(orig, TimeoutError) and not str(orig):
        return "the server did not answer" + (f" within {waited_s:g} s" if waited_s is not None else " in time")
    if type(orig).__name__ == "ConnectionTimeout":  # psycopg.errors, not imported: not a dependency
        return "the server did not answer" + (
            f" within {libpq_seconds(waited_s)} s" if waited_s is not None else " in time"
        )
    return f"{type(orig).__name__}: {orig}".removesuffix(": ")
