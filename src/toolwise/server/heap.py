"""What a running toolwise keeps out of the cyclic garbage collector's walks.

A full (generation 2) collection holds the GIL while it visits every tracked object: the modules, classes
and validators imported, the catalogue and its schemas, the learned state. Hundreds of thousands of them
after start-up, a full collection took about 110 ms of a quiet Xeon (docs/benchmarks.md), and whichever
thread set it off, the event loop waited for it whole: no call was answered meanwhile. What start-up
built lives as long as the server, so it is frozen (`gc.freeze`, gunicorn's and Instagram's trick):
reference counting still frees a frozen object, the collections from then on walk only what was made
since. Only a reference cycle among frozen objects would outlive its use until the last `release`.

Freezing is process-wide, and a process may run more than one app (an embedding program, the tests): each
running app holds the heap frozen (`hold`), and it is walked again once the last of them lets go.
"""

from __future__ import annotations

import gc

_holders = 0  # apps running in this process that hold the heap frozen (`hold`, `release`)


def settle() -> None:
    """Take everything alive now out of the collections from here on (what start-up built, or a learned
    state loaded), and collect again (the CLI turns collection off while it imports: `cli/main.py`)."""
    gc.freeze()
    gc.enable()


def hold() -> None:
    """An app has started: `settle`, and the heap stays frozen until it and every other app holding it
    `release` it."""
    global _holders  # noqa: PLW0603 - the process's one heap, held by each app in it
    _holders += 1
    settle()


def release() -> None:
    """An app that held the heap stops: once no app holds it, what was frozen is walked again, so that a
    process that runs servers in turn (the tests, a benchmark) collects the cycles each left behind. An
    app still running keeps it frozen: its start-up's heap stays out of the collections' walks."""
    global _holders  # noqa: PLW0603 - see `hold`
    if _holders <= 0:
        raise RuntimeError("heap.release() without a hold(): an app released the heap it never held")
    _holders -= 1
    if _holders == 0:
        gc.unfreeze()
