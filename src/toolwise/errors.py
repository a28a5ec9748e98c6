"""What the caller got wrong: the one base every expected error shares, so the MCP edge (server/handlers.py)
answers it as an `is_error` result naming what was wrong, and treats anything else as a bug (logged
with its traceback, answered generically). Below every package: each may raise one."""

from __future__ import annotations


class UserError(Exception):
    """Something the caller asked for is not possible as asked; the message says what to change."""
