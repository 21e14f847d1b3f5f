"""ListedSpace (a listed subset of a product space) and min-max NumericKnob encoding."""
import numpy as np
import pytest

from tunebench.listed_space import ListedSpace
from tunebench.search_space import ChoiceKnob, NumericKnob


def test_numeric_knob_min_max_encoding():
    k = NumericKnob("f", (2, 5, 10))  # [Sun-PhD] §3.3.2 example (docs/REFERENCES.md): {2, 5, 10} -> {0, 0.375, 1}
    assert [k.encode(i)[0] for i in range(3)] == pytest.approx([0, 0.375, 1])


def test_listed_space_index_features_moves():
    knobs = [NumericKnob("u", (1, 2, 4)), ChoiceKnob("p", ("cyclic", "block"))]
    rows = [(0, 0), (1, 0), (2, 0), (0, 1), (1, 0)]  # duplicate dropped
    sp = ListedSpace(knobs, rows)
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
    sp = ListedSpace(knobs, rows)
    every = np.array([(a, b, c) for a in range(3) for b in range(2) for c in range(4)])
    want = [sp.index_of_digits(r) if sp.contains_digits(r) else -1 for r in every.tolist()]
    assert sp.positions(every).tolist() == want
    assert sorted(p for p in want if p >= 0) == [0, 1, 2, 3]


def _walk_one_by_one(sp, indices, rng):
    """The walk as one loop over the points (one draw per point that moves): what ``walk`` must equal."""
    movable = np.flatnonzero(sp.dims > 1)
    out = np.asarray(indices, dtype=np.int64).copy()
    for j, k in enumerate(movable[rng.integers(len(movable), size=len(out))]):
        digits = sp._rows[out[j]]
        line = [i for i, r in enumerate(sp._rows) if r[:k] + r[k + 1:] == digits[:k] + digits[k + 1:]]
        if len(line) > 1:
            pick = int(rng.integers(len(line) - 1))
            out[j] = [i for i in line if i != out[j]][pick]
    return out


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_walk_equals_one_draw_per_point(seed):
    """The vectorized walk moves every point where the per-point loop moves it, with the same draws (the
    generator is left in the same state): a seeded search walks the same path."""
    gen = np.random.default_rng(seed)
    knobs = [ChoiceKnob("a", (1, 2, 3, 4)), ChoiceKnob("b", (0, 1, 2)), NumericKnob("c", (4, 8, 16)),
             ChoiceKnob("d", ("x",))]
    every = [(a, b, c, 0) for a in range(4) for b in range(3) for c in range(3)]
    rows = [every[i] for i in gen.choice(len(every), 20, replace=False)]  # a sparse listing: short lines
    sp = ListedSpace(knobs, rows)
    mine, ref = np.random.default_rng(seed + 10), np.random.default_rng(seed + 10)
    points = gen.integers(sp.size, size=64)
    a, b = points, points
    for _ in range(30):
        a, b = sp.walk(a, mine), _walk_one_by_one(sp, b, ref)
        assert a.tolist() == b.tolist()
    assert mine.random() == ref.random()
    alone = ListedSpace(knobs[:1], [(0,), (2,)])  # one knob: every config on one line
    assert alone.walk(np.array([0, 1, 1]), np.random.default_rng(0)).tolist() == [1, 0, 0]
