"""The typed settings machinery (tunebench.config): a knob declared once with its type, default,
check and doc; data typed onto it with one-line errors; checks across keys; overrides."""

from dataclasses import dataclass, field

import pytest

from tunebench.config.knobs import POS_INT, Settings, bad, bounded, choice, join, knob, opt, validate
from tunebench.config.load import dotted_get, dotted_set, plain, typed, with_overrides
from tunebench.errors import UserError


@dataclass
class Inner(Settings):
    size: int = knob(4, POS_INT, "a size")
    mode: str = knob("a", choice("a", "b"), "a mode")


@dataclass
class Outer(Settings):
    OPEN_KEYS = ("extra",)
    count: int = knob(2, bounded(1, 10), "a count")
    ratio: float | None = knob(None, opt(lambda v: None if 0 <= v <= 1 else "must be in [0, 1]"), "a ratio")
    inner: Inner = knob(factory=Inner, doc="nested")
    extra: dict = knob({}, None, "open: any key")
    names: list[str] = field(default_factory=lambda: ["x"], metadata={"doc": "names"})

    def check(self, prefix: str) -> None:
        if self.inner.size < self.count:
            raise bad(join(prefix, "inner.size"), self.inner.size, f"must be >= count ({self.count})")


@pytest.mark.parametrize("data, says", [
    ({"count": "abc"}, "x.count='abc': must be an integer"),
    ({"count": 11}, "x.count=11: must be an integer in [1, 10]"),
    ({"ratio": 2}, "x.ratio=2.0: must be in [0, 1] or null"),
    ({"inner": {"mode": "c"}}, "x.inner.mode='c': valid: a, b"),
    ({"inner": {"sise": 3}}, "x.inner.sise is unknown"),
    ({"colour": 1}, "x.colour is unknown"),
    ({"names": 5}, "x.names=5: must be a list"),
    ({"count": 5, "inner": {"size": 3}}, "x.inner.size=3: must be >= count (5)"),
])
def test_typed_data_fails_in_one_line_naming_the_dotted_key(data, says):
    with pytest.raises(UserError) as exc:
        typed(Outer, data, "x")
    assert str(exc.value).startswith(says) and "\n" not in str(exc.value)


def test_typed_keeps_defaults_converts_numbers_and_leaves_open_keys_open():
    obj = typed(Outer, {"count": 3, "ratio": 1, "extra": {"anything": [1, 2]}}, "x")
    assert (obj.count, obj.ratio, obj.inner, obj.extra) == (3, 1.0, Inner(), {"anything": [1, 2]})
    assert plain(obj) == {"count": 3, "ratio": 1.0, "inner": {"size": 4, "mode": "a"}, "extra": {"anything": [1, 2]},
                          "names": ["x"]}
    assert typed(Outer, plain(obj), "x") == obj  # a saved config types back to the same settings


def test_overrides_are_checked_and_a_nested_mapping_is_typed():
    obj = with_overrides(Outer, None, {"count": 4, "inner": {"size": 8}}, "x")
    assert obj.inner == Inner(size=8) and obj.count == 4
    with pytest.raises(UserError, match="x.cont is unknown; valid: count, ratio, inner, extra, names"):
        with_overrides(Outer, None, {"cont": 4}, "x")
    with pytest.raises(UserError, match=r"x.count=0: must be an integer in \[1, 10\]"):
        with_overrides(Outer, obj, {"count": 0}, "x")


def test_validate_walks_nested_settings_and_dotted_paths_reach_into_them():
    obj = Outer()
    dotted_set(obj, "inner.mode", "z")
    assert dotted_get(obj, "inner.mode") == "z" and dotted_get(obj, "inner.nope", None) is None
    with pytest.raises(UserError, match="cfg.inner.mode='z': valid: a, b"):
        validate(obj, "cfg")
