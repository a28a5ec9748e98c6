"""The choice model's learning step (rl/policies/choice.py), as plain functions over its arrays.

The model holds θ (tools × dim), the AdaGrad sums per tool (`steps`) and per feature weight
(`weight_steps`), the feature weights w and the calls learned per tool (`chosen`); these functions
compute one step of gradient ascent on the shortlist's softmax (one call, or a minibatch of them) and
add it to those arrays in place. The model decides which calls are learned, when, and how often
(its replays); this module only says how far each parameter moves.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import NDArray

from toolwise.rl.policies.base import best_k


def softmax(scores: NDArray[np.float64]) -> NDArray[np.float64]:
    # the ufuncs' reductions that `max` and `sum` wrap, in place: the same numbers, fewer steps (a call
    # learned takes nine softmaxes of a few candidates each)
    z = scores - np.maximum.reduce(scores)
    p: NDArray[np.float64] = np.exp(z, out=z)
    p /= np.add.reduce(p)
    return p


def shortlisted_softmax(scores: NDArray[np.float64], k: int) -> NDArray[np.float64]:
    """Each score's probability as the choice model reports it: the softmax over the `k` best (its shortlist,
    picked as `ChoiceModel.select` picks it); one outside it, over the shortlist and itself."""
    if len(scores) <= k:
        return softmax(scores)
    short = best_k(scores, k)
    e = np.exp(scores - scores.max())
    total = np.add.reduce(e.take(short))
    p: NDArray[np.float64] = e / (total + e)
    p[short] = e.take(short) / total
    return p


@dataclass(slots=True)
class Minibatch:
    """What a run's minibatches share: θ's float32 copy, kept in step with θ (its products with x(q), the
    most of a minibatch's time, at float32's speed), the run's distinct x(q) as float32, and whether its
    candidates are every tool in id order (their θ then read in place)."""

    theta: NDArray[np.float32]
    x: NDArray[np.float32]
    in_order: bool


def shrink(chosen: NDArray[np.int64], arms: NDArray[np.int64], shrinkage: float) -> NDArray[np.float64]:
    """(n + 1)/(n + 1 + shrinkage) for each of `arms`, n its learned calls (`chosen`): how much of θ_tᵀx counts."""
    evidence = chosen.take(arms) + 1.0
    shrunk: NDArray[np.float64] = evidence / (evidence + shrinkage)
    return shrunk


def towards(p: NDArray[np.float64], at: int, weight: float, worked: bool) -> NDArray[np.float64]:
    """The gradient on the scores of log p[at] (worked) or log(1 − p[at]) (not), times `weight`."""
    if worked:
        direction: NDArray[np.float64] = -weight * p
        direction[at] += weight
        return direction
    share = p[at] / max(1.0 - p[at], 0.05)  # bounded: a near-certain wrong tool moves by a finite step
    direction = weight * share * p
    direction[at] = -weight * p[at]
    return direction


def shortlist(
    scores: NDArray[np.float64], arms: NDArray[np.int64], called: int, passed_over: int | None, k: int
) -> NDArray[np.intp]:
    """Where in `arms` a call's softmax looks: the `k` best `scores`, the called arm and the one passed over."""
    keep = best_k(scores, k)
    inside = np.flatnonzero(arms == called)
    keep = np.union1d(keep, inside)
    if passed_over is not None:
        keep = np.union1d(keep, np.flatnonzero(arms == passed_over))
    return keep


def minibatch_shortlist(
    run: Minibatch,
    queries: NDArray[np.int64],
    arms: NDArray[np.int64],
    rows: NDArray[np.floating[Any]],
    called: NDArray[np.int64],
    weights: NDArray[np.float64],
    k: int,
) -> tuple[NDArray[np.float32], NDArray[np.int64], NDArray[np.floating[Any]], NDArray[np.intp]]:
    """Each call's `k` best-scored candidates (its called one in the last place if they miss it), for
    `minibatch_step`: the calls' x(q), the shortlisted tools, their feature rows and where the called one is."""
    x = run.x.take(queries, 0)
    theta = run.theta[: len(arms)] if run.in_order else run.theta.take(arms, 0)  # a run's: read in place
    scores = x @ theta.T  # float32: it only picks the shortlist
    scores += rows @ weights.astype(rows.dtype)
    short = np.argpartition(np.negative(scores, out=scores), k - 1, axis=1)[:, :k]
    hit = short == called[:, None]
    outside = ~hit.any(axis=1)
    short[outside, -1] = called[outside]
    at = np.argmax(hit, axis=1)
    at[outside] = k - 1
    tools = arms.take(short)
    batch, width, features = rows.shape
    cells = short + (np.arange(batch) * width)[:, None]  # each pick's row in `rows` seen as (batch·width, features)
    picked = rows.reshape(batch * width, features).take(cells.ravel(), 0).reshape(batch, k, features)
    return x, tools, picked, at


def step(
    theta: NDArray[np.float64],
    steps: NDArray[np.float64],
    weights: NDArray[np.float64],
    weight_steps: NDArray[np.float64],
    x: NDArray[np.float64],
    arms: NDArray[np.int64],
    rows: NDArray[np.float64],
    direction: NDArray[np.float64],
    shrunk: NDArray[np.float64],
    *,
    learning_rate: float,
    weight_rate: float,
) -> None:
    """Ascend the objective whose gradient on the candidates' scores is `direction` (`shrunk`: the arms'
    `shrink`), in place on θ, the AdaGrad sums and the feature weights. The arms are distinct (a call's
    candidates)."""
    arm_steps = steps.take(arms)
    arm_steps += direction * direction
    steps[arms] = arm_steps  # `steps[arms] += d²`, and what it stored, without reading it back
    rate = learning_rate / np.sqrt(1.0 + arm_steps)
    moved = rate * direction * shrunk  # the chain rule through it
    theta[arms] += moved[:, None] * x
    ascend_weights(weights, weight_steps, direction @ rows, weight_rate)


def ascend_weights(
    weights: NDArray[np.float64], weight_steps: NDArray[np.float64], gradient: NDArray[np.float64], weight_rate: float
) -> None:
    """The feature weights' AdaGrad step along `gradient`, in place (`weight_steps`: their Σ g²), for one
    call (`step`) or a minibatch's mean gradient (`minibatch_step`)."""
    weight_steps += gradient * gradient
    weights += weight_rate * gradient / np.sqrt(1.0 + weight_steps)


class Calls(NamedTuple):
    """A minibatch's calls, as `minibatch_step` takes them (the call memory's `rows_of` gives them so)."""

    x: NDArray[np.float32]  # each call's x(q)
    tools: NDArray[np.int64]  # its shortlisted tools (−1: none)
    rows: NDArray[np.floating[Any]]  # their feature rows
    at: NDArray[np.int64]  # where the called tool is among them
    worked: NDArray[np.bool_]
    weight: NDArray[np.floating[Any]]


def minibatch_step(
    theta: NDArray[np.float64],
    steps: NDArray[np.float64],
    weights: NDArray[np.float64],
    weight_steps: NDArray[np.float64],
    chosen: NDArray[np.int64],
    run: Minibatch,
    calls: Calls,
    *,
    shrinkage: float,
    learning_rate: float,
    weight_rate: float,
) -> NDArray[np.float64]:
    """One minibatch step over `calls` (x, tools, rows, at, worked, weight): row r's candidates are
    `tools[r]` (−1: none) with feature `rows[r]`, the call chose `tools[r, at[r]]`. Steps against the
    parameters before it; each tool moves by its steps' sum over the calls of it in the batch (their
    mean), the feature weights by the mean gradient.
    The products over x(q) are float32 (with θ's float32 copy, `run`; the steps are added to θ in
    float64): their rounding is far below what a step moves. Returns each call's probability of its
    called tool before the step."""
    x, tools, rows, at, worked, weight = calls
    batch, k = tools.shape
    valid = tools >= 0
    padded = not valid.all()  # remembered calls with fewer candidates than the ring is wide
    safe = np.where(valid, tools, 0) if padded else tools
    flat = safe.ravel()
    shrunk = shrink(chosen, flat, shrinkage).reshape(safe.shape)
    scores = np.einsum("bkd,bd->bk", run.theta.take(safe, 0), x) * shrunk
    wide = rows.astype(np.float64)  # what einsum casts them to (once here: twice, in buffers, there)
    scores += np.einsum("bkf,f->bk", wide, weights)
    if padded:
        scores[~valid] = -np.inf
    scores -= scores.max(axis=1, keepdims=True)
    p = np.exp(scores, out=scores)
    p /= p.sum(axis=1, keepdims=True)
    mine = np.arange(batch), at
    before: NDArray[np.float64] = p[mine]
    # the gradient of log p_called (worked) or log(1 − p_called) (not) on each candidate's score
    direction = p * (np.where(worked, -1.0, before / np.maximum(1.0 - before, 0.05)) * weight)[:, None]
    direction[mine] = np.where(worked, 1.0 - before, -before) * weight
    if padded:
        direction[~valid] = 0.0
    moved = direction.ravel()
    steps += np.bincount(flat, moved * moved, len(steps))
    pairs = np.flatnonzero(valid) if padded else slice(None)  # (tool, call) pairs, each once: no padding
    call_of = np.repeat(np.arange(batch), k)  # each pair's call
    _move_theta(
        theta, steps, run, x, flat[pairs], (moved * shrunk.ravel())[pairs], call_of[pairs], tools[mine], learning_rate
    )
    ascend_weights(weights, weight_steps, np.einsum("bk,bkf->f", direction, wide) / batch, weight_rate)
    return before


def _move_theta(
    theta: NDArray[np.float64],
    steps: NDArray[np.float64],
    run: Minibatch,
    x: NDArray[np.float32],
    tools: NDArray[np.int64],
    moved: NDArray[np.float64],
    calls: NDArray[np.int64],
    called: NDArray[np.int64],
    learning_rate: float,
) -> None:
    """θ_t += rate_t / (calls of t) · Σ moved·x(q) over the (tool, call) pairs of t (`tools[i]`, `calls[i]`:
    each pair once): a (tools × batch) matrix of the steps, times x in float32 (one product instead of
    a scatter of every pair's row of x); θ and its float32 copy move together."""
    tools_n = len(steps)
    used = np.flatnonzero(np.bincount(tools, minlength=tools_n))
    rate = learning_rate / np.sqrt(1.0 + steps.take(used))
    rate /= np.maximum(np.bincount(called, minlength=tools_n), 1).take(used)
    slot = np.zeros(tools_n, np.int64)
    slot[used] = np.arange(len(used))
    at = slot.take(tools)
    per_call = np.zeros((len(used), len(x)), np.float32)
    per_call[at, calls] = moved * rate.take(at)
    moved_theta = theta.take(used, 0)
    moved_theta += per_call @ x
    theta[used] = moved_theta
    run.theta[used] = moved_theta
