"""Layer specs of ``model=layers``: each a conv2d (+bias)(+ReLU) or a dense layer (+bias)(+ReLU) at a
given shape.

Conv2d keys: ``in_channels, height, width, out_channels, kernel, stride, padding`` (required) and
``batch=1, groups=1, relu=true`` (optional). Dense (fully connected) keys: ``in_features,
out_features`` (required) and ``batch=1, relu=true``; a spec with ``in_features`` is a dense layer.
:func:`normalize_layer` checks one spec and fills in the defaults; every problem is a one-line
:class:`UserError` naming ``model.layers[i].<key>``.
"""

from __future__ import annotations

import os

from tunebench.errors import UserError

LAYER_KEYS = ("in_channels", "height", "width", "out_channels", "kernel", "stride", "padding")
LAYER_DEFAULTS = {"batch": 1, "groups": 1, "relu": True}
DENSE_KEYS = ("in_features", "out_features")
DENSE_DEFAULTS = {"batch": 1, "relu": True}


def is_dense(spec: dict) -> bool:
    """Whether a (normalized) layer spec is a dense layer."""
    return "in_features" in spec
_MIN = {"padding": 0}  # every other integer key must be >= 1


def _where(index: int | None) -> str:
    return "model.layers" if index is None else f"model.layers[{index}]"


def normalize_layer(shape, index: int | None = None) -> dict:
    """A validated copy of one layer spec with the defaults filled in."""
    at = _where(index)
    if not isinstance(shape, dict):
        raise UserError(f"{at}={shape!r}: must be a mapping with keys {', '.join(LAYER_KEYS)} "
                        f"(conv2d) or {', '.join(DENSE_KEYS)} (dense)")
    keys, defaults = (DENSE_KEYS, DENSE_DEFAULTS) if is_dense(shape) else (LAYER_KEYS, LAYER_DEFAULTS)
    missing = [k for k in keys if k not in shape]
    if missing:
        raise UserError(f"{at} misses {', '.join(missing)}; required: {', '.join(keys)}")
    unknown = sorted(set(shape) - set(keys) - set(defaults))
    if unknown:
        raise UserError(f"{at}.{unknown[0]} is unknown; valid: {', '.join(keys + tuple(defaults))}")
    out = {**defaults, **shape}
    for key, value in out.items():
        if key == "relu":
            if not isinstance(value, bool):
                raise UserError(f"{at}.relu={value!r}: must be true or false")
        elif not isinstance(value, int) or isinstance(value, bool) or value < _MIN.get(key, 1):
            raise UserError(f"{at}.{key}={value!r}: must be an integer >= {_MIN.get(key, 1)}")
    if not is_dense(out):
        _check_geometry(out, at)
    return out


def _check_geometry(s: dict, at: str) -> None:
    if s["in_channels"] % s["groups"] or s["out_channels"] % s["groups"]:
        raise UserError(f"{at}.groups={s['groups']}: must divide in_channels={s['in_channels']} "
                        f"and out_channels={s['out_channels']}")
    for side in ("height", "width"):
        padded = s[side] + 2 * s["padding"]
        if s["kernel"] > padded:
            raise UserError(f"{at}.kernel={s['kernel']}: larger than the padded input "
                            f"({side} {s[side]} + 2 x padding {s['padding']} = {padded})")


def layer_bytes(s: dict) -> int:
    """Bytes of a normalized layer's input, weights and output in float32."""
    if is_dense(s):
        return 4 * (s["batch"] * (s["in_features"] + s["out_features"]) + s["in_features"] * s["out_features"])
    out_h = (s["height"] + 2 * s["padding"] - s["kernel"]) // s["stride"] + 1
    out_w = (s["width"] + 2 * s["padding"] - s["kernel"]) // s["stride"] + 1
    weights = s["out_channels"] * (s["in_channels"] // s["groups"]) * s["kernel"] ** 2
    return 4 * (s["batch"] * (s["in_channels"] * s["height"] * s["width"] + s["out_channels"] * out_h * out_w)
                + weights)


def available_bytes() -> int:
    """Memory this machine has available now (Linux ``MemAvailable``; else its physical memory)."""
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


MEMORY_SHARE = 0.25  # a layer's tensors may take this share of the available memory (copies: reference, builds)


def _check_size(s: dict, at: str, limit: int) -> None:
    need = layer_bytes(s)
    if need > limit:
        raise UserError(f"{at}: its input, weights and output take {need / 1e9:.3g} GB in float32; at most "
                        f"{limit / 1e9:.3g} GB fit ({MEMORY_SHARE:.0%} of the {available_bytes() / 1e9:.3g} GB "
                        "this machine has available: the reference, the builds and the baselines copy them)")


def check_layer_list(layers) -> list[dict]:
    """A non-empty list of valid layer specs, normalized; each small enough for this machine's memory."""
    if not isinstance(layers, list) or not layers:
        raise UserError(f"model.layers={layers!r}: must be a non-empty list of layer specs "
                        f"(keys {', '.join(LAYER_KEYS)})")
    out = [normalize_layer(s, i) for i, s in enumerate(layers)]
    limit = int(MEMORY_SHARE * available_bytes())
    for i, s in enumerate(out):
        _check_size(s, _where(i), limit)
    return out
