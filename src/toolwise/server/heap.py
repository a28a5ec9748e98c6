"""What a running toolwise keeps out of the cyclic garbage collector's walks.

A full (generation 2) collection holds the GIL while it visits every tracked object: the modules, classes
and validators imported, the catalogue and its schemas, the learned state. Hundreds of thousands of them
after start-up, a full collection took about 110 ms of a quiet Xeon (docs/benchmarks.md), and whichever
thread set it off, the event loop waited for it whole: no call was answered meanwhile. What start-up
built lives as long as the server, so it is frozen (`gc.freeze`, gunicorn's and Instagram's trick):
reference counting still frees a frozen object, the collections from then on walk only what was made
since. Only a reference cycle among frozen objects would outlive its use until `release`.
"""

from __future__ import annotations

import gc


def settle() -> None:
    """Take everything alive now out of the collections from here on (what start-up built, or a learned
    state loaded), and collect again (the CLI turns collection off while it imports: `cli/main.py`)."""
    gc.freeze()
    gc.enable()


def release() -> None:
    """The server stops: what it froze is walked again, so that a process that runs more than one in turn
    (the tests, a benchmark) collects the cycles each left behind. Process-wide, as `settle` is: a server
    beside it in the same process has its own heap walked again until it settles once more."""
    gc.unfreeze()
