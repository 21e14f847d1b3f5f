"""Weights-only tensor files: ``torch.save`` of a format name, JSON metadata and named tensors, read back
with ``torch.load(weights_only=True)`` so that a crafted file cannot run code. Trained models and training
sets of the learning methods (gat, glimpse) are such files; every key and shape is checked by the reader
of each format, and a bad file is a one-line :class:`~tunebench.errors.UserError` naming it."""

from __future__ import annotations

import json
import warnings

import torch

from tunebench.errors import UserError


def save_tensor_file(path: str, fmt: str, meta: dict, tensors: dict) -> None:
    """``torch.save`` of ``{"format": fmt, "meta": <meta as JSON>, "tensors": {name: tensor}}``:
    nothing that ``torch.load(weights_only=True)`` refuses, nothing that runs code when loaded."""
    torch.save({"format": fmt, "meta": json.dumps(meta), "tensors": {k: torch.as_tensor(v) for k, v in tensors.items()}},
               path)


def first_line(exc: BaseException) -> str:
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    hit = next((ln for ln in lines if "GLOBAL" in ln or "Unsupported" in ln), lines[0] if lines else "")
    return f"{type(exc).__name__}: {hit}"[:300]


def load_tensor_file(path: str, what: str, fmt: str) -> tuple[dict, dict]:
    """``(meta, tensors)`` of a file from :func:`save_tensor_file` in format ``fmt``, read with
    ``weights_only=True``. Anything else (a pickle with code in it, another format, a file from an
    older tunebench) raises a one-line UserError ``<what> <path>: ...``."""
    try:
        with warnings.catch_warnings():  # torch warns about foreign pickle protocols: the error below says it all
            warnings.simplefilter("ignore")
            obj = torch.load(path, map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise UserError(f"{what} {path}: no such file") from None
    except Exception as exc:
        raise UserError(f"{what} {path}: refused, not a weights-only tunebench file ({first_line(exc)})") from None
    if not isinstance(obj, dict) or obj.get("format") != fmt:
        found = obj.get("format") if isinstance(obj, dict) else type(obj).__name__
        raise UserError(f"{what} {path}: not a {fmt} file (format {found!r}; files from older tunebench "
                        "versions must be written again)")
    try:
        meta = json.loads(obj["meta"])
    except (KeyError, TypeError, ValueError):
        raise UserError(f"{what} {path}: its metadata is missing or not JSON") from None
    tensors = obj.get("tensors")
    if not isinstance(meta, dict) or not isinstance(tensors, dict) or \
            not all(isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in tensors.items()):
        raise UserError(f"{what} {path}: metadata must be a JSON object and 'tensors' a dict of tensors")
    return meta, tensors


def require(cond: bool, what: str, path: str, problem: str) -> None:
    """Raise the one-line UserError ``<what> <path>: <problem>`` unless ``cond``."""
    if not cond:
        raise UserError(f"{what} {path}: {problem}")


def checked_state(net, tensors: dict, prefix: str, what: str, path: str, label: str, against: str) -> dict:
    """The ``<prefix>.*`` tensors of a file as ``net``'s state dict, their keys and shapes equal to ``net``'s;
    a mismatch is the one-line UserError ``<what> <path>: <label> tensors do not match <against> (...)``."""
    state = {k[len(prefix) + 1:]: v for k, v in tensors.items() if k.startswith(prefix + ".")}
    want = net.state_dict()
    missing, extra = sorted(set(want) - set(state)), sorted(set(state) - set(want))
    require(not missing and not extra, what, path,
            f"{label} tensors do not match {against} (missing {missing[:3]}, unexpected {extra[:3]})")
    for key, ref in want.items():
        require(tuple(state[key].shape) == tuple(ref.shape), what, path,
                f"tensor {prefix}.{key} has shape {tuple(state[key].shape)}, expected {tuple(ref.shape)}")
    return state
