"""Whether a call of a tool works for a request: evidence kept per tool and request, and its calibration.

The choice model answers "which tool will the agent call here?"; this answers "will a call of this tool
work for this request?", from outcomes only (success, failure, a rating; read in hindsight: see
rl/hindsight.py). For each tool it keeps up to `slots` prototypes of the requests it was called for
(unit vectors x(q), the choice model's query features), each with the weight of calls that worked and
failed there. A request q reads a tool's evidence through a kernel on the cosine to each prototype,

    W = Σ_j k(cos(q, x_j)) · worked_j,   F = Σ_j k(cos(q, x_j)) · failed_j,   k(c) = clip((c − c₀)/(1 − c₀), 0, 1)^γ

so an exact repeat of a request counts in full (the tabular memory of the design's seed; its cosine, a
float32 product of unit vectors, may miss 1 by ~1e-7 and is read as 1: else one call there weighed
0.9999998, short of the verdicts' "enough") and a paraphrase in part. With m the prior mean,
P(works) = (s₀·m + W) / (s₀ + W + F): a Beta posterior whose evidence n = W + F says how much it rests on.
The prior m is the choice model's probability p_agent calibrated on the outcomes seen (`Calibration`,
rl/calibration.py): with no evidence, "works" is as likely as the agent's habitual tool has turned out to
be. A request never seen near a tool gives n = 0, m.

Memory is bounded: a new request within `merge` cosine of a prototype adds to it; when a tool's slots
are full, its two closest prototypes merge (weighted mean, counts summed) to make room, so nothing
learned is dropped and nothing grows with the log. float32 vectors: slots × dim × 4 bytes a tool.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, TypeVar

import numpy as np
from numpy.typing import NDArray

from toolwise.rl.ids import grown_rows
from toolwise.rl.mixture import Mixture

SAME = 1.0 - 1e-5  # a cosine from which a prototype is the request itself (float32 rounding misses 1)


@dataclass(frozen=True, slots=True)
class OutcomeConfig:
    slots: int = 16  # prototypes of requests kept per tool
    merge: float = 0.95  # a request this close (cosine) to a prototype adds to it
    floor: float = 0.5  # cosine below which a prototype says nothing of a request
    power: float = 2.0  # the kernel's sharpness above the floor
    prior_strength: float = 1.0  # s₀: calls the prior mean counts as
    calibration_rate: float = 0.05  # AdaGrad rate of the calibration's two weights
    start: float = 20.0  # outcomes the prior's calibration counts its start as (it says 0.5 until it has learned)

    def __post_init__(self) -> None:
        if self.slots < 2:
            raise ValueError(f"need slots ≥ 2, got {self.slots}")
        if not -1.0 < self.floor < self.merge <= 1.0:
            raise ValueError(f"need -1 < floor < merge ≤ 1, got floor {self.floor}, merge {self.merge}")
        if self.power <= 0 or self.prior_strength <= 0 or self.calibration_rate < 0:
            raise ValueError(
                "need power > 0, prior_strength > 0, calibration_rate ≥ 0; got "
                f"{self.power}, {self.prior_strength}, {self.calibration_rate}"
            )


@dataclass(slots=True)
class Estimate:
    """P(works) of each arm asked about, and the evidence (calls, kernel-weighted) it rests on; `gate`: the
    same with each prototype read as one request's evidence (`Mixture.weight`), where a mixture was given."""

    p_works: NDArray[np.float64]
    evidence: NDArray[np.float64]
    gate: Estimate | None = None


@dataclass(slots=True)
class Served:
    """What each arm asked about has served: the best cosine of the request x(q) to a prototype of requests
    a call of it worked for (−1: none), how many of its calls worked, at how many prototypes (kinds of
    request, up to `slots`), and how alike those are (the median of each one's cosine to its nearest other;
    −1 below two). Far from a tool's requests says most when they resemble one another. `failed`: the best
    cosine to a prototype of requests its calls only failed for (−1: none; "nothing fits" after failures)."""

    near: NDArray[np.float64]
    worked: NDArray[np.float64]
    kinds: NDArray[np.int64]
    coherence: NDArray[np.float64]
    failed: NDArray[np.float64] | None = None  # None: as all −1


Mean = TypeVar("Mean", float, NDArray[np.float64])  # one arm's, or each arm's


class OutcomeMemory:
    def __init__(self, dim: int, config: OutcomeConfig | None = None) -> None:
        self.config = c = config or OutcomeConfig()
        self.dim = dim
        self.vectors = np.zeros((16, c.slots, dim), np.float32)
        self.worked = np.zeros((16, c.slots))
        self.failed = np.zeros((16, c.slots))
        self.used = np.zeros(16, np.int64)
        self._mixture: Mixture | None = None  # `mixture()`, computed when first asked after a change

    def _ensure(self, arm: int) -> None:
        rows = len(self.used)
        if arm < rows:
            return
        grow = grown_rows(rows, [arm]) - rows
        c = self.config
        self.vectors = np.concatenate([self.vectors, np.zeros((grow, c.slots, self.dim), np.float32)])
        self.worked = np.concatenate([self.worked, np.zeros((grow, c.slots))])
        self.failed = np.concatenate([self.failed, np.zeros((grow, c.slots))])
        self.used = np.concatenate([self.used, np.zeros(grow, np.int64)])

    def kernel(self, cosine: NDArray[np.float64]) -> NDArray[np.float64]:
        c = self.config
        k: NDArray[np.float64] = np.clip((cosine - c.floor) / (1.0 - c.floor), 0.0, 1.0) ** c.power
        k[cosine >= SAME] = 1.0  # the request itself
        return k

    def estimate(
        self,
        arms: NDArray[np.int64],
        x: NDArray[np.float64],
        prior: NDArray[np.float64],
        mixture: Mixture | None = None,
    ) -> Estimate:
        """P(works) for each of `arms` for the request x(q) (unit length), shrunk to `prior` (each arm's
        prior mean) by s₀ calls; with `mixture`, its `gate` too."""
        known = arms < len(self.used)
        seen = np.flatnonzero(self.used.take(np.where(known, arms, 0)) * known)  # the arms with a prototype
        s0 = self.config.prior_strength
        if not len(seen):  # no evidence (W = F = 0): the prior, as the sums below give it, each array its own
            alone = (s0 * prior + 0.0) / s0
            gate = None if mixture is None else Estimate(alone.copy(), np.zeros(len(arms)))
            return Estimate(alone, np.zeros(len(arms)), gate)
        w, f = np.zeros(len(arms)), np.zeros(len(arms))
        gw, gf = np.zeros(len(arms)), np.zeros(len(arms))
        safe = arms.take(seen)  # the others read no evidence: nothing to gather
        cosine = self.vectors.take(safe, 0) @ x.astype(np.float32)  # (arms, slots); unused slots are 0
        k = self.kernel(cosine.astype(np.float64))
        worked, failed = self.worked.take(safe, 0), self.failed.take(safe, 0)
        w[seen] = (k * worked).sum(axis=1)
        f[seen] = (k * failed).sum(axis=1)
        if mixture is not None:
            gw[seen], gf[seen] = self._gate(k, cosine, worked, failed, mixture)
        gate = None if mixture is None else Estimate((s0 * prior + gw) / (s0 + gw + gf), gw + gf)
        return Estimate((s0 * prior + w) / (s0 + w + f), w + f, gate)

    def reread(self, mean: Mean, prior: Mean, evidence: Mean) -> Mean:
        """What reading `estimate`'s P(works) with the prior mean `mean` instead of `prior` adds to it, on
        `evidence` calls: s₀(mean − prior)/(s₀ + evidence)."""
        s0 = self.config.prior_strength
        return s0 * (mean - prior) / (s0 + evidence)

    def _gate(
        self,
        k: NDArray[np.float64],
        cosine: NDArray[np.float32],
        worked: NDArray[np.float64],
        failed: NDArray[np.float64],
        mixture: Mixture,
    ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """The verdicts' evidence (W, F) of each arm: other requests' prototypes each as it says something
        of this one (`Mixture.weight`), the one this request would add to (its own calls) in full. Against
        the request's own calls the others together count as no more than the tool's concentration across
        its requests (`Mixture.concentration` of its pooled counts): a tool right for one kind of request and
        wrong for another is not kept first by its successes on requests near this one after failing here
        (the demo's "what time is it in Paris": convert_time rated 1 twice, P(works) 0.50 on conversions
        naming Paris). Where a tool's calls agree, they count in full, as before."""
        own = cosine >= self.config.merge
        near = np.nonzero((k > 0) & ~own)
        k = k.copy()
        k[near] *= mixture.weight(worked[near], failed[near])
        kw, kf = k * worked, k * failed
        own_w, own_f = np.where(own, kw, 0.0).sum(axis=1), np.where(own, kf, 0.0).sum(axis=1)
        other_w, other_f = kw.sum(axis=1) - own_w, kf.sum(axis=1) - own_f
        kappa = mixture.concentration(worked.sum(axis=1), failed.sum(axis=1))
        other = other_w + other_f
        capped = (own_w + own_f > 0) & np.isfinite(kappa) & (other > 0)
        share = np.divide(kappa, other + kappa, out=np.ones_like(other), where=capped)
        return own_w + share * other_w, own_f + share * other_f

    def mixture(self) -> Mixture:
        """q_r and q_w as every tool's prototypes show them (`Mixture.of`), kept until a count changes."""
        if self._mixture is None:
            self._mixture = Mixture.of(self.worked, self.failed)
        return self._mixture

    def served(self, arms: NDArray[np.int64], x: NDArray[np.float64], *, coherence: bool = True) -> Served:
        """How near the request x(q) (unit length) comes to the requests each of `arms` worked for, read
        only ("nothing fits", rl/fit.py: a request far from all a well-known tool served is not its kind).
        `coherence` costs a product of a tool's prototypes with themselves each (without: all −1)."""
        rows = len(self.used)
        if all(arm >= rows or not self.used[arm] for arm in arms.tolist()):
            # what "nothing fits" asks of candidates with no prototype (a fresh state): no gathers
            n = len(arms)
            return Served(np.full(n, -1.0), np.zeros(n), np.zeros(n, np.int64), np.full(n, -1.0), np.full(n, -1.0))
        known = arms < rows
        safe = np.where(known, arms, 0)
        worked = self.worked.take(safe, 0) * known[:, None]
        cosine = (self.vectors.take(safe, 0) @ x.astype(np.float32)).astype(np.float64)
        served = worked > 0
        kinds = served.sum(axis=1)
        alike = np.full(len(arms), -1.0)
        for i in np.flatnonzero(kinds >= 2).tolist() if coherence else ():
            alike[i] = self._coherence(int(safe[i]), served[i])
        failed = ~served & (self.failed.take(safe, 0) * known[:, None] > 0)
        near, unserved = np.where(served, cosine, -1.0).max(axis=1), np.where(failed, cosine, -1.0).max(axis=1)
        return Served(near, worked.sum(axis=1), kinds, alike, unserved)

    def failed_near(self, x: NDArray[np.float64], within: float) -> int:
        """How many prototypes, over every tool, of requests whose calls only failed lie within `within` (cosine)
        of the request x(q) (unit length): how many failed requests are near, not only the nearest ("nothing
        fits", rl/fit.py). Reads only the tools with a failed call."""
        arms = np.flatnonzero(self.failed.sum(axis=1) > 0)
        if not len(arms):
            return 0
        only_failed = (self.worked.take(arms, 0) == 0) & (self.failed.take(arms, 0) > 0)
        cosine = self.vectors.take(arms, 0) @ x.astype(np.float32)
        return int(np.count_nonzero(only_failed & (cosine >= within)))

    def _coherence(self, arm: int, served: NDArray[np.bool_]) -> float:
        """The median of each `served` prototype's cosine to its nearest other served one (≥ 2 of them)."""
        vectors = self.vectors[arm][served]
        alike = vectors @ vectors.T
        np.fill_diagonal(alike, -np.inf)
        nearest = np.sort(alike.max(axis=1))
        n = len(nearest)
        return (float(nearest[(n - 1) // 2]) + float(nearest[n // 2])) / 2.0

    def add(self, arm: int, x: NDArray[np.float64], worked: float, failed: float) -> None:
        """Count `worked` and `failed` (call weights) for `arm` at the request x(q). A zero x (no request)
        says nothing of any request and is not kept."""
        self._mixture = None
        if not x.any():
            return
        self._ensure(arm)
        slot = self._slot(arm, x.astype(np.float32))
        self.worked[arm, slot] += worked
        self.failed[arm, slot] += failed

    def add_many(self, arms: list[int], vectors: NDArray[np.float32], rows: list[int], worked: list[float]) -> None:
        """`add` of each call in order: call i of `arms[i]` at the request `vectors[rows[i]]` (x(q) of a
        run's distinct requests, float32), `worked[i]` of it worked and the rest failed. The arrays grow
        once, to the shape call by call gives, and the requests are made unit length at once (`_units`)."""
        self._mixture = None
        said: list[bool] = (np.count_nonzero(vectors, axis=1) > 0).tolist()
        self._ensure(grown_rows(len(self.used), [arm for arm, row in zip(arms, rows, strict=True) if said[row]]) - 1)
        units = _units(vectors)
        counts_worked, counts_failed = self.worked, self.failed
        for arm, row, w in zip(arms, rows, worked, strict=True):
            if said[row]:
                slot = self._slot(arm, vectors[row], units[row])
                counts_worked[arm, slot] += w
                counts_failed[arm, slot] += 1.0 - w

    def revise(self, arm: int, x: NDArray[np.float64], worked: float, failed: float) -> None:
        """Change counts kept for `arm` at x(q), as hindsight or a rating revises a call already
        counted: at the prototype nearest x (where it was added), never below zero."""
        if not x.any() or arm >= len(self.used) or not self.used[arm]:
            return
        self._mixture = None
        n = int(self.used[arm])
        cosine = self.vectors[arm, :n] @ x.astype(np.float32)
        slot = int(np.argmax(cosine))
        if cosine[slot] < self.config.floor:  # its prototype is gone (the tool was forgotten): nothing to revise
            return
        self.worked[arm, slot] = max(0.0, self.worked[arm, slot] + worked)
        self.failed[arm, slot] = max(0.0, self.failed[arm, slot] + failed)

    def _slot(self, arm: int, v: NDArray[np.float32], unit: NDArray[np.float32] | None = None) -> int:
        """The prototype the request v (x(q) as float32) adds to: the nearest within `merge`, else a new one
        (the two closest merged first when the slots are full), v at unit length (`unit`, where the caller
        has it); its vector moves to the weighted mean."""
        n = int(self.used[arm])
        if n:
            cosine = self.vectors[arm, :n] @ v
            near = int(cosine.argmax())
            if cosine[near] >= self.config.merge:
                self._move(arm, near, v, 1.0)
                return near
        if n == self.config.slots:
            n = self._merge_closest(arm)
        self.vectors[arm, n] = _unit(v) if unit is None else unit
        self.used[arm] = n + 1
        return n

    def _move(self, arm: int, slot: int, v: NDArray[np.float32], weight: float) -> None:
        held = self.worked[arm, slot] + self.failed[arm, slot]
        mean = self.vectors[arm, slot] * np.float32(held)
        mean += v if weight == 1.0 else v * np.float32(weight)  # v·1 is v: the same float32s, a product fewer
        self.vectors[arm, slot] = _unit(mean)

    def _merge_closest(self, arm: int) -> int:
        """Merge the two closest prototypes of a full tool into one; returns the freed slot (the last)."""
        vectors, worked, failed = self.vectors[arm], self.worked[arm], self.failed[arm]
        cosine = vectors @ vectors.T
        cosine.flat[:: len(vectors) + 1] = -np.inf  # the diagonal: a prototype is not its own closest
        i, j = divmod(int(cosine.argmax()), len(vectors))
        i, j = min(i, j), max(i, j)
        self._move(arm, i, vectors[j], worked[j] + failed[j])
        worked[i] += worked[j]
        failed[i] += failed[j]
        last = len(vectors) - 1
        if j != last:  # the last slot is the one freed
            vectors[j] = vectors[last]
            worked[j], failed[j] = worked[last], failed[last]
        vectors[last], worked[last], failed[last] = 0.0, 0.0, 0.0
        return last

    def forget(self, arm: int) -> None:
        """The tool changed (drift): what it did before says nothing of it now."""
        self._mixture = None
        if arm < len(self.used):
            self.vectors[arm], self.worked[arm], self.failed[arm], self.used[arm] = 0.0, 0.0, 0.0, 0

    def state_dict(self) -> dict[str, Any]:
        return {
            "config": asdict(self.config),
            "vectors": self.vectors.copy(),
            "worked": self.worked.copy(),
            "failed": self.failed.copy(),
            "used": self.used.copy(),
        }

    def load_state(self, state: dict[str, Any]) -> None:
        vectors = np.asarray(state["vectors"], dtype=np.float32)
        if vectors.shape[1:] != (self.config.slots, self.dim):
            want = (self.config.slots, self.dim)
            raise ValueError(f"outcome memory of shape {vectors.shape[1:]} does not fit {want}")
        self._mixture = None
        self.vectors = vectors.copy()
        self.worked = np.asarray(state["worked"], dtype=np.float64).copy()
        self.failed = np.asarray(state["failed"], dtype=np.float64).copy()
        self.used = np.asarray(state["used"], dtype=np.int64).copy()

    def nbytes(self) -> int:
        return self.vectors.nbytes + self.worked.nbytes + self.failed.nbytes + self.used.nbytes


def _unit(v: NDArray[np.float32]) -> NDArray[np.float32]:
    """v at unit length (`np.linalg.norm`, without its checks; sqrt in float64 of the float32 dot: the same
    float32 as np.sqrt's, a float64 root rounds exactly); 0 stays 0."""
    unit: NDArray[np.float32] = v / max(math.sqrt(float(v @ v)), 1e-12)
    return unit


def _units(vectors: NDArray[np.float32]) -> NDArray[np.float32]:
    """`_unit` of each row at once, the same numbers: a stacked matmul takes one dot a row, as `v @ v` does."""
    norms = np.sqrt(np.matmul(vectors[:, None, :], vectors[:, :, None])[:, 0, 0].astype(np.float64))
    units: NDArray[np.float32] = vectors / np.maximum(norms, 1e-12).astype(np.float32)[:, None]
    return units
