"""``model=onnx`` on a TVM target: the ONNX file prepared by :mod:`tunebench.datasets.onnx_file` (checked,
constant shape computations folded by ONNX Runtime) imported into Relax through TVM's ONNX frontend and
fused like a PyTorch model (:func:`~tunebench.targets.tvm.workloads.relax_import.fusion_passes`); its
reference output stays ONNX Runtime's on the file as given.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Sequence

import numpy as np

from tunebench.datasets.import_stages import stage
from tunebench.datasets.onnx_file import prepared_onnx
from tunebench.errors import UserError

log = logging.getLogger(__name__)


def unsupported_operators(model) -> list[str]:
    """The operator types of ``model`` that TVM's ONNX importer has no converter for."""
    from tvm.relax.frontend.onnx.onnx_frontend import _get_convert_map

    known = _get_convert_map()
    return sorted({n.op_type for n in model.graph.node if n.op_type not in known})


def check_operators(model, path: str) -> None:
    """Raise a one-line :class:`UserError` when TVM's ONNX importer cannot convert an operator of ``model``
    (the ``ModelProto`` of ``path``)."""
    if missing := unsupported_operators(model):
        raise UserError(f"model.path={path}: TVM's ONNX importer does not support the operator(s) "
                        f"{', '.join(missing)}")


def import_onnx(path: str, shapes: Sequence[list[int]], seed: int, target_kind: str):
    """The :class:`~tunebench.targets.tvm.workloads.relax_import.ImportedModel` of an ONNX file (constant shape
    computations folded first: :func:`~tunebench.datasets.onnx_file.prepared_onnx`); its reference stays the file as given.

    Raises:
        UserError: a stage failed (one line naming the file, the stage and the first cause).
    """
    from tvm import relax
    from tvm.relax.frontend.onnx import from_onnx

    from tunebench.targets.tvm.workloads.relax_import import ImportedModel, fusion_passes, make_target

    label = f"model.path={path}"
    t0 = time.perf_counter()
    model, specs, inputs = prepared_onnx(path, shapes, seed, check=lambda m: check_operators(m, path))
    target = make_target(target_kind)
    with stage(label, "Relax import (TVM's ONNX frontend)"):
        mod = from_onnx(model, shape_dict={k: list(s) for k, (s, _) in specs.items()},
                        dtype_dict={k: np.dtype(d).name for k, (_, d) in specs.items()}, keep_params_in_input=True,
                        sanitize_input_names=False)
        mod, params = relax.frontend.detach_params(mod)
    with stage(label, "fusion (Relax passes)"), target:
        mod = fusion_passes()(mod)
    arrays = [p.numpy() for p in params.get("main", [])]
    dt = time.perf_counter() - t0
    log.info("imported %s for %s in %.1f s (%d params)", os.path.basename(path), target_kind, dt, len(arrays))
    return ImportedModel(mod=mod, params=arrays, torch_module=None, example_input=tuple(inputs),
                         target_kind=target_kind, import_s=dt, onnx_path=os.path.abspath(path),
                         input_names=tuple(specs))
