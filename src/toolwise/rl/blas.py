"""One BLAS thread for a block of small matrix products.

A multi-threaded BLAS on the products learning runs (a minibatch of 32 queries against 1,000 tools,
128×128 systems) is far slower than one thread on a loaded machine (its threads wait for cores the
event loop and the learning thread need), and no faster on a quiet one at these sizes. The limit is the
process's while the block runs; the controller is found once, as entering `threadpool_limits` afresh
searches the process's loaded libraries for their thread pools each time.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from functools import cache
from typing import Any

from threadpoolctl import ThreadpoolController


@cache
def _controller() -> ThreadpoolController:
    return ThreadpoolController()


def one_blas_thread() -> AbstractContextManager[Any]:
    """A context in which BLAS runs on one thread."""
    limited: AbstractContextManager[Any] = _controller().limit(limits=1, user_api="blas")
    return limited
