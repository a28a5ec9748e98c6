"""Whether requests have one right tool or several: what one tool's success at a request says of another's.

The prior mean of a tool's P(works) (rl/calibration.py) is learned on the tools the agent called, and an
agent calls a tool mostly where it is right: a recommended tool it would not have called works less often
than its calls do. How much less depends on the world. Where a request has one right tool (BFCL live),
another tool's success there says this one is wrong: a call at a request where another tool worked works
about 0.4 of the time, against 0.85 where the other failed. Where it has several (NESTFUL's chains), the
other's success says little (0.71–0.87 against 0.84–0.94). The ratio of the two, `alike`, says which.
Counted over exact repeats of a request (its x(q)), since near-identical requests are rare.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import numpy as np
from numpy.typing import NDArray


class Several:
    """Per request (its x(q)), the latest fit of each tool called there; over calls of a tool at a request
    where another tool was called before, how often it worked where the other worked (row 0) and where it
    failed (row 1). A call's count follows its rating (`revise`)."""

    def __init__(self, capacity: int = 4096) -> None:
        self.capacity = capacity
        # request (the hash of its x(q)'s bytes) → tool → (its latest fit there, the row it counted in; −1: none)
        self.seen: OrderedDict[int, dict[int, tuple[float, int]]] = OrderedDict()
        self.pairs = np.zeros((2, 2))  # rows: another tool worked / failed there; columns: worked, failed

    def count(self, x: NDArray[np.float64], arm: int, fit: float) -> None:
        """A call of `arm` at the request x(q) with its fit (1 worked, 0 did not fit); a zero x (no request)
        is no request to pair."""
        if not x.any():
            return
        key = hash(x.tobytes())
        tools = self.seen.get(key)
        if tools is None:
            tools = self.seen[key] = {}
            if len(self.seen) > self.capacity:
                self.seen.popitem(last=False)
        else:
            self.seen.move_to_end(key)
        others = [f for tool, (f, _) in tools.items() if tool != arm]
        row = -1
        if others:
            row = 0 if max(others) >= 0.5 else 1
            self.pairs[row] += (fit, 1.0 - fit)
        tools[arm] = (fit, row)

    def revise(self, x: NDArray[np.float64], arm: int, change: float) -> None:
        """A rating changed the fit of the latest call of `arm` at x(q) by `change`."""
        tools = self.seen.get(hash(x.tobytes()))
        if tools is None or arm not in tools:
            return
        fit, row = tools[arm]
        tools[arm] = (fit + change, row)
        if row >= 0:
            counts = self.pairs[row]
            counts[0], counts[1] = max(0.0, counts[0] + change), max(0.0, counts[1] - change)

    def alike(self) -> float:
        """P(works | another tool worked at the request) / P(works | another failed there), in [0, 1]: near 1
        where requests have several right tools, about 1/2 where they have one. Each rate starts from one
        call (a half where another worked, a whole where it failed): 1/2 before any pair is seen, the
        single right tool that most catalogues' requests have."""
        after_success = (self.pairs[0, 0] + 0.5) / (self.pairs[0].sum() + 1.0)
        after_failure = (self.pairs[1, 0] + 1.0) / (self.pairs[1].sum() + 1.0)
        return float(min(after_success / after_failure, 1.0))

    def state_dict(self) -> dict[str, Any]:
        return {"pairs": self.pairs.copy()}

    def load_state(self, state: dict[str, Any]) -> None:
        self.pairs = np.asarray(state["pairs"], dtype=np.float64).copy()
