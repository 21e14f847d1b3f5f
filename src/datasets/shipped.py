"""The measured spaces shipped under ``data/``: their checksums and the named sets of them.

A shipped folder with a ``SHA256SUMS`` file (``sha256sum`` format: ``<hex>  <file name>``; today
``data/kernel_tuner/`` and ``data/spaces/``) lists the sha256 of each file it ships: reading a listed file whose bytes differ
(edited, truncated, a bad copy) is one ``error:`` line, before any run. Files a user adds to the folder
(not listed) are read unchecked, as any file outside ``data/``.

Sets (``python -m tunebench suite <set>``): ``cpu``, this project's CPU spaces (``data/spaces/llvm_*``);
``gpu``, the eight benchmark-hub caches (convolution and dedispersion on A100, A4000, MI250X, W6600),
Kernel Tuner's MI50 convolution (``data/kernel_tuner/``, README there) and this project's GPU spaces
(``data/spaces/cuda_*``, where shipped); ``all``, both. A space file's name starts with the TVM target it was
measured on (``space measure`` names it so), which is how a shipped space finds its set.
"""

from __future__ import annotations

import functools
import glob
import hashlib
import os

from tunebench.errors import UserError
from tunebench.resources import data_dir

MANIFEST = "SHA256SUMS"
GPUS = ("A100", "A4000", "MI250X", "W6600")
GPU_SPACES = tuple(f"kernel_tuner/{kernel}_milo_{gpu}.json.gz" for kernel in ("convolution", "dedispersion")
                   for gpu in GPUS) + ("kernel_tuner/convolution_MI50.json.gz",)


def _measured(target_kind: str) -> tuple[str, ...]:
    """This project's shipped space files measured on ``target_kind`` (``data/spaces/<kind>_*.jsonl[.gz]``)."""
    folder = data_dir("spaces")
    pattern = os.path.join(folder, f"{target_kind}_*.jsonl*")
    return tuple(f"spaces/{os.path.basename(p)}" for p in sorted(glob.glob(pattern)))


def _gpu_spaces() -> tuple[str, ...]:
    return GPU_SPACES + _measured("cuda")


SETS = {"cpu": lambda: _measured("llvm"), "gpu": _gpu_spaces, "all": lambda: _measured("llvm") + _gpu_spaces()}


def space_set(name: str) -> list[str]:
    """The absolute paths of the shipped spaces of set ``name``.

    Raises:
        UserError: an unknown set; a shipped file that is missing (a broken install).
    """
    if name not in SETS:
        raise UserError(f"set {name!r} is unknown; valid: {', '.join(SETS)} (or --spaces FILE...)")
    paths = [data_dir(rel) for rel in SETS[name]()]
    missing = [p for p in paths if not os.path.isfile(p)]
    if missing or not paths:
        raise UserError(f"set {name}: shipped space {missing[0] if missing else data_dir('spaces')} is missing "
                        "(reinstall tunebench, or git checkout data/)")
    return paths


@functools.lru_cache(maxsize=8)
def _manifest(path: str, mtime_ns: int) -> dict[str, str]:
    out = {}
    for line in open(path).read().splitlines():
        digest, _, name = line.strip().partition("  ")
        if digest and name:
            out[name.lstrip("*")] = digest.lower()
    return out


def expected_sha256(path: str) -> str | None:
    """The sha256 recorded for ``path`` in the ``SHA256SUMS`` beside it when it is a shipped file under
    ``data/``; None for any other file."""
    folder = os.path.dirname(os.path.realpath(path))
    root = os.path.realpath(data_dir())
    manifest = os.path.join(folder, MANIFEST)
    if os.path.commonpath([folder, root]) != root or not os.path.isfile(manifest):
        return None
    return _manifest(manifest, os.stat(manifest).st_mtime_ns).get(os.path.basename(path))


def verify_shipped(path: str, raw: bytes) -> None:
    """Check a shipped file's bytes against its recorded sha256 (module docstring).

    Raises:
        UserError: the bytes differ from what was shipped.
    """
    want = expected_sha256(path)
    if want is None:
        return
    got = hashlib.sha256(raw).hexdigest()
    if got != want:
        raise UserError(f"model.path={path}: sha256 {got[:12]} is not the shipped file's ({want[:12]}, "
                        f"{os.path.join(os.path.dirname(path), MANIFEST)}): the file was edited or is corrupt; "
                        "restore it (git checkout data/, or reinstall tunebench)")
