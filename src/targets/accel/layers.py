"""Layers of ``target=accel`` as loop nests: ``model=layers`` specs (conv2d, dense), the paper's
problems (``model=accel_paper``) and the conv2d / dense layers of the zoo's networks, found by running the
PyTorch model once with hooks (no TVM import).

A conv2d is B=batch, K=out_channels, C=in_channels, OY/OX=output height/width, FY=FX=kernel; a dense
layer (or a matrix product M x N x K) is B=batch (M), K=out_features (N), C=in_features (K).
"""

from __future__ import annotations

from tunebench.datasets.layer_spec import check_layer_list, is_dense
from tunebench.errors import UserError


def loops_of(spec: dict) -> tuple[dict, int]:
    """``(loop sizes, stride)`` of a normalized layer spec; grouped convolutions are refused (the array
    unrolls C and K of one group: a depthwise layer would use one row)."""
    if is_dense(spec):
        return {"B": spec["batch"], "K": spec["out_features"], "C": spec["in_features"]}, 1
    if spec["groups"] != 1:
        raise UserError(f"layer {spec_text(spec)}: groups={spec['groups']} cannot be mapped on target=accel "
                        "(its array unrolls C and K of one dense convolution); valid: groups=1")
    out_h = (spec["height"] + 2 * spec["padding"] - spec["kernel"]) // spec["stride"] + 1
    out_w = (spec["width"] + 2 * spec["padding"] - spec["kernel"]) // spec["stride"] + 1
    return ({"B": spec["batch"], "K": spec["out_channels"], "C": spec["in_channels"], "OY": out_h, "OX": out_w,
             "FY": spec["kernel"], "FX": spec["kernel"]}, spec["stride"])


def spec_text(spec: dict) -> str:
    if is_dense(spec):
        return f"dense {spec['batch']}x{spec['in_features']}->{spec['out_features']}"
    return (f"conv2d {spec['in_channels']}x{spec['height']}x{spec['width']}->{spec['out_channels']} "
            f"k{spec['kernel']} s{spec['stride']} p{spec['padding']}")


def zoo_layer_specs(name: str, seed: int = 0) -> list[dict]:
    """The distinct conv2d / dense layers of a zoo network (batch 1), in order of first use, each with
    ``count`` (its occurrences)."""
    import torch

    from tunebench.datasets.zoo import build_model

    model, x = build_model(name, seed)
    specs: dict = {}

    def hook(module, args, _out):
        x = args[0]
        if isinstance(module, torch.nn.Conv2d):
            spec = {"in_channels": module.in_channels, "height": int(x.shape[2]), "width": int(x.shape[3]),
                    "out_channels": module.out_channels, "kernel": int(module.kernel_size[0]),
                    "stride": int(module.stride[0]), "padding": int(module.padding[0]), "groups": module.groups}
        else:
            spec = {"in_features": module.in_features, "out_features": module.out_features}
        key = tuple(sorted(spec.items()))
        specs.setdefault(key, [spec, 0])[1] += 1

    handles = [m.register_forward_hook(hook) for m in model.modules() if isinstance(m, (torch.nn.Conv2d, torch.nn.Linear))]
    with torch.no_grad():
        model(x)
    for h in handles:
        h.remove()
    out = []
    for spec, count in specs.values():
        out.append({**check_layer_list([spec])[0], "count": count})
    return out
