"""ExplicitSpace (a listed subset of a product space) and min-max NumericKnob encoding."""
import numpy as np
import pytest

from tunebench.explicit_space import ExplicitSpace
from tunebench.space import ChoiceKnob, NumericKnob


def test_numeric_knob_min_max_encoding():
    k = NumericKnob("f", (2, 5, 10))  # [Sun-PhD] §3.3.2 example (docs/REFERENCES.md): {2, 5, 10} -> {0, 0.375, 1}
    assert [k.encode(i)[0] for i in range(3)] == pytest.approx([0, 0.375, 1])


def test_explicit_space_index_features_moves():
    knobs = [NumericKnob("u", (1, 2, 4)), ChoiceKnob("p", ("cyclic", "block"))]
    rows = [(0, 0), (1, 0), (2, 0), (0, 1), (1, 0)]  # duplicate dropped
    sp = ExplicitSpace(knobs, rows)
    assert sp.size == 4 and sp.full_size == 6
    assert sp.get(3).to_dict() == {"u": 1, "p": "block"}
    assert sp.from_dict({"u": 4, "p": "cyclic"}).index == 2
    with pytest.raises(ValueError):
        sp.from_dict({"u": 4, "p": "block"})  # pruned away
    np.testing.assert_allclose(sp.features([0, 1, 2, 3]), [[0, 0], [1 / 3, 0], [1, 0], [0, 1]])
    assert sorted(sp.neighbors(0)) == [1, 3] and sp.neighbors(2) == [1]
    rng = np.random.default_rng(0)
    assert all(sp.random_walk(3, rng) == 0 for _ in range(5))  # only (u=1) differs in one knob
    assert sorted(sp.sample(rng, 10)) == [0, 1, 2, 3]


def test_positions_is_index_of_digits_vectorized():
    import numpy as np

    knobs = [ChoiceKnob("a", (1, 2, 3)), ChoiceKnob("b", (0, 1)), NumericKnob("c", (4, 8, 16, 32))]
    rows = [(2, 1, 3), (0, 0, 0), (1, 1, 2), (2, 0, 1)]
    sp = ExplicitSpace(knobs, rows)
    every = np.array([(a, b, c) for a in range(3) for b in range(2) for c in range(4)])
    want = [sp.index_of_digits(r) if sp.contains_digits(r) else -1 for r in every.tolist()]
    assert sp.positions(every).tolist() == want
    assert sorted(p for p in want if p >= 0) == [0, 1, 2, 3]
