"""dgp's preparation as a file: the deep GP pre-trained on a task's source records, written once and read
by every run that transfers from the same sources (``method.pretrained``), so that the pre-training is a
preparation on no run's clock ([Sun-ICCV21] §3.2: "The DGP preparation step is task-independent"; the
source layers' tuning and the pre-training are not on dgp's clock, docs/METHODS.md §dgp step 7).

The file is a weights-only tensor file (:mod:`tunebench.tensor_files`): the model's state dict, what
rebuilds it (features, hidden width, inducing points, seed, target scaling) and the key of what it was
trained on (:meth:`~tunebench.methods.tensor_programs.dgp.method.DGP.model_key`: group, source tasks and their record
counts, settings), which a run checks against its own sources before it uses the model.
"""

from __future__ import annotations

import numpy as np

from tunebench.tensor_files import checked_state, load_tensor_file, require, save_tensor_file

FORMAT = "tunebench-dgp-pretrained-1"
WHAT = "method.pretrained"


def save_pretrained(path: str, key: tuple, model, info: dict | None = None) -> None:
    """Write ``model`` (a fitted :class:`~tunebench.methods.tensor_programs.dgp.model.DeepGP`) pre-trained for ``key``."""
    meta = {"key": repr(key), "n_features": model.n_features, "hidden_dims": int(model.hidden.output_dims),
            "num_inducing": int(model.output.variational_strategy.inducing_points.shape[-2]), "seed": model.seed,
            "y_mean": model.y_mean, "y_std": model.y_std, "info": dict(info or {})}
    save_tensor_file(path, FORMAT, meta, {f"model.{k}": v for k, v in model.state_dict().items()})


def load_pretrained(path: str) -> tuple[str, object, dict]:
    """``(key as written by repr, the DeepGP, the info saved with it)`` of a file from
    :func:`save_pretrained`; a bad file is a one-line UserError naming it."""
    from tunebench.methods.tensor_programs.dgp.model import DeepGP

    meta, tensors = load_tensor_file(path, WHAT, FORMAT)
    ints = ("n_features", "hidden_dims", "num_inducing", "seed")
    require(all(isinstance(meta.get(k), int) and meta[k] >= 0 for k in ints) and isinstance(meta.get("key"), str)
            and all(isinstance(meta.get(k), (int, float)) for k in ("y_mean", "y_std")), WHAT, path,
            f"metadata must hold key (text), {', '.join(ints)} (whole numbers), y_mean and y_std (numbers)")
    d, m = meta["n_features"], meta["num_inducing"]
    require(d > 0 and m > 0, WHAT, path, "n_features and num_inducing must be >= 1")
    x_init = np.arange(m * d, dtype=np.float32).reshape(m, d)  # m distinct rows: the inducing points' shapes
    model = DeepGP(x_init, hidden_dims=meta["hidden_dims"], num_inducing=m, seed=meta["seed"])
    model.load_state_dict(checked_state(model, tensors, "model", WHAT, path, "model", "its metadata"))
    model.y_mean, model.y_std = float(meta["y_mean"]), float(meta["y_std"])
    model.eval()
    return meta["key"], model, dict(meta.get("info") or {})
