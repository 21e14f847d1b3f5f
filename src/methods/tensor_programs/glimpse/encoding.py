"""What Glimpse's networks read: the layer specification Π and the features of a knob's values.

- **Layer** (:func:`layer_vector`): the task kind (one-hot: conv2d, depthwise_conv2d, dense) and log2 of
  its shape (batch, channels in/out, height, width, kernel, stride, padding, groups; dense: batch, in and
  out features) and of its FLOPs, scaled by 1/10.
- **Knob value** (:func:`value_features`): for a split (a tuple of factors of an axis of length L), per
  factor ``r = log2 f / log2 L``, ``a = log2 f / 8`` and ``a²`` (a linear score over them is a log-normal
  bump: the prior can peak at a tile size); for a number ``a = log2(1 + v) / 8`` and ``a²``. The same
  features come from a config of a space (tuning) and from a record's config values (training), so a
  knob is recognized by its name and value type, not by its space.
"""

from __future__ import annotations

import math

import numpy as np

from tunebench.search_space import Space, factorizations

KINDS = ("conv2d", "depthwise_conv2d", "dense")
SHAPE_KEYS = ("batch", "in_channels", "out_channels", "height", "width", "kernel", "stride", "padding", "groups",
              "in_features", "out_features")
LAYER_DIM = len(KINDS) + len(SHAPE_KEYS) + 1


def _num(v) -> float:
    if isinstance(v, (list, tuple)):
        return float(max(v)) if v else 0.0
    try:
        return float(v)
    except (TypeError, ValueError):
        return 0.0


def layer_vector(kind: str, shape: dict, flops: int) -> np.ndarray:
    """Π of a task (float32 of length :data:`LAYER_DIM`)."""
    onehot = [1.0 if kind == k else 0.0 for k in KINDS]
    dims = [math.log2(1 + max(0.0, _num(shape.get(k, 0)))) / 10 for k in SHAPE_KEYS]
    return np.array(onehot + dims + [math.log2(1 + max(0, int(flops or 0))) / 40], dtype=np.float32)


def value_dim(value) -> int:
    """The feature length of a knob value: 3 per factor of a split, 2 for a number."""
    return 3 * len(value) if isinstance(value, (list, tuple)) else 2


def value_features(value) -> list[float]:
    """φ of one knob value (see the module docstring); non-numeric values count as 0."""
    if isinstance(value, (list, tuple)):
        factors = [max(1, int(_num(f))) for f in value]  # a loop order's names (target=accel) count as 1
        length = math.prod(factors)
        out = []
        for f in factors:
            lf = math.log2(f)
            a = lf / 8
            out += [lf / math.log2(length) if length > 1 else 0.0, a, a * a]
        return out
    a = math.log2(1 + max(0.0, _num(value))) / 8
    return [a, a * a]


def knob_signature(space: Space) -> dict[str, int]:
    """Knob name -> the feature length of its values, for a space's knobs (what a trained model must know)."""
    return {k.name: value_dim(k.entities[0]) for k in space.knobs}


def entity_features(space: Space) -> list[np.ndarray]:
    """Per knob, the features of all its entities: (n_entities, value_dim) float32 each."""
    return [np.array([value_features(v) for v in k.entities], dtype=np.float32) for k in space.knobs]


def gather(tables: list[np.ndarray], digits: np.ndarray) -> np.ndarray:
    """Configs' concatenated per-knob rows: ``tables[k]`` (n_entities, dim) indexed by ``digits[:, k]``."""
    return np.concatenate([t[digits[:, k]] for k, t in enumerate(tables)], axis=1)


def entities_of_value(value, seen: list) -> list:
    """The entities of the knob a recorded ``value`` belongs to: every factorization of the split's axis
    into as many parts (what the template's space holds), or the choice values ``seen`` in the records."""
    if isinstance(value, (list, tuple)):
        return [list(t) for t in factorizations(math.prod(int(f) for f in value), len(value))]
    return sorted(seen, key=_num)

