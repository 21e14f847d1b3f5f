"""Pareto front, ADRS and normalized hypervolume on hand-computed fronts."""
import numpy as np
import pytest

from tunebench.pareto import adrs, normalized_hypervolume, pareto_front


def test_pareto_front_hand():
    Y = np.array([[1, 4], [2, 2], [4, 1], [3, 3], [2, 2], [5, 5], [np.inf, 0]])
    # (3,3) dominated by (2,2); (5,5) by everything; the duplicate (2,2) is kept; inf row ignored
    assert pareto_front(Y).tolist() == [0, 1, 2, 4]
    assert pareto_front(np.zeros((0, 2))).tolist() == []


def test_adrs_hand():
    G = [[1, 4], [2, 2], [4, 1]]
    W = [[1, 4], [3, 3]]
    # g=(1,4): 0 ; g=(2,2): min(max(-.5, 1), max(.5, .5)) = .5 ; g=(4,1): min(3, 2) = 2
    assert adrs(G, W) == pytest.approx((0 + 0.5 + 2) / 3)
    assert adrs(G, G) == 0.0
    assert adrs(G, [[0.5, 0.5]]) == 0.0  # a dominating point leaves no distance
    assert adrs(G, []) == float("inf")


def test_normalized_hypervolume_hand():
    Y = [[1, 4], [2, 2], [4, 1]]
    # staircase area to (5,5): 1*1 + 2*3 + 1*4 = 11 of 25
    assert normalized_hypervolume(Y, [5, 5], [1, 1]) == pytest.approx(11 / 25)
    # same in scaled units: Y/[2,1] against ref (2.5, 5)
    assert normalized_hypervolume(Y, [2.5, 5], [2, 1]) == pytest.approx(11 / 25)
    # points beyond the reference contribute nothing
    assert normalized_hypervolume([[6, 1]], [5, 5], [1, 1]) == 0.0
    # 3 objectives, one point at the box centre dominates (1 - 0.5)^3 = 1/8 of it
    assert normalized_hypervolume([[0.5, 0.5, 0.5]], [1, 1, 1], [1, 1, 1]) == pytest.approx(0.125)
