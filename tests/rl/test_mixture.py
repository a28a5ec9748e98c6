"""How much a prototype of requests says of one request (rl/mixture.py): a prototype whose calls all agree is
read in full; one that pools requests a tool is right for with requests it is wrong for says of one request
no more than the spread between them allows, however many calls it holds."""

from __future__ import annotations

import numpy as np

from toolwise.rl.mixture import Mixture


def test_right_and_wrong_calls_success_rates_are_learned_from_the_prototypes() -> None:
    worked = np.array([[85.0, 0.0], [15.0, 2.0]])
    failed = np.array([[15.0, 0.0], [85.0, 2.0]])  # the 2/2 prototype is neither
    mixture = Mixture.of(worked, failed)
    assert abs(mixture.right - 86 / 102) < 1e-9 and abs(mixture.wrong - 16 / 102) < 1e-9
    assert Mixture.of(np.zeros(3), np.zeros(3)) == Mixture(0.5, 0.5)


def test_a_blend_of_right_and_wrong_requests_is_read_as_few_calls_and_an_agreeing_one_in_full() -> None:
    mixture = Mixture(0.85, 0.15)
    worked, failed = np.array([60.0, 85.0, 2.0, 0.0]), np.array([79.0, 15.0, 28.0, 0.0])
    weight = mixture.weight(worked, failed)
    assert weight[0] * 139 < 2.0  # 139 calls at 0.43: about a third of its requests right, one's own rate unknown
    assert np.allclose(weight[1:], 1.0)  # as a right call does here, as a wrong one does, nothing


def test_whether_a_middling_rate_is_a_blend_depends_on_how_often_right_calls_fail_here() -> None:
    worked, failed = np.array([86.0]), np.array([14.0])
    flaky, reliable = Mixture(0.85, 0.15), Mixture(0.999, 0.01)
    assert np.allclose(flaky.weight(worked, failed), 1.0)  # what a right call does here: one request's rate
    assert reliable.weight(worked, failed)[0] * 100 < 10.0  # right calls never fail here: some requests wrong
