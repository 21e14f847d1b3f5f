"""The Blueprint ([Ahn-PhD] §4.4.1): a PCA embedding of a hardware's specification sheet.

A hardware *family* has a raw feature vector per device (``cpu``: an LLVM CPU model at a thread count,
:mod:`~tunebench.methods.tensor_programs.glimpse.cpu_specs`; ``gpu``: an NVIDIA GPU's datasheet joined with its TVM target
tag, :mod:`~tunebench.methods.tensor_programs.glimpse.gpu_specs`). The PCA is fitted over the family's catalogue
(standardized features; a feature constant over the catalogue is left out of the scaling), and a device's
Blueprint is its first ``dims`` principal-component scores. :func:`reconstruction_rmse` gives Fig. 4.4's
curve: the error of reconstructing the standardized catalogue from ``k`` components, for every ``k``.

``mode="constant"`` (the ablation) replaces every device's Blueprint by the zero vector (the catalogue
mean): the same networks, no information about the hardware.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tunebench.errors import UserError

FAMILIES = ("cpu", "gpu")


@dataclass
class PCA:
    """Standardization and principal axes of a feature matrix (rows: devices)."""

    mean: np.ndarray  # (d,)
    scale: np.ndarray  # (d,), 1 where a feature is constant
    components: np.ndarray  # (k, d), orthonormal rows, by decreasing variance
    explained: np.ndarray  # (k,) variance ratio of each component

    @classmethod
    def fit(cls, X: np.ndarray, k: int | None = None) -> PCA:
        X = np.asarray(X, dtype=np.float64)
        mean = X.mean(axis=0)
        std = X.std(axis=0)
        scale = np.where(std > 1e-12, std, 1.0)
        Z = (X - mean) / scale
        _, s, vt = np.linalg.svd(Z, full_matrices=False)
        var = s**2
        total = var.sum() if var.sum() > 0 else 1.0
        k = len(s) if k is None else min(int(k), len(s))
        comps = vt[:k]
        for i in range(k):  # sign convention: the largest loading of each axis is positive (deterministic)
            if comps[i, np.argmax(np.abs(comps[i]))] < 0:
                comps[i] = -comps[i]
        return cls(mean, scale, comps, var[:k] / total)

    def transform(self, x: np.ndarray) -> np.ndarray:
        return ((np.asarray(x, dtype=np.float64) - self.mean) / self.scale) @ self.components.T

    def tensors(self) -> dict[str, np.ndarray]:
        return {"pca.mean": self.mean, "pca.scale": self.scale, "pca.components": self.components,
                "pca.explained": self.explained}

    @classmethod
    def from_tensors(cls, t: dict) -> PCA:
        return cls(*(np.asarray(t[f"pca.{k}"], dtype=np.float64) for k in ("mean", "scale", "components",
                                                                             "explained")))


def reconstruction_rmse(X: np.ndarray) -> list[float]:
    """Root-mean-squared error of the standardized catalogue ``X`` reconstructed from its first k principal
    components, for k = 0 .. d ([Ahn-PhD] Fig. 4.4; in standardized units, 0 at k = rank)."""
    full = PCA.fit(X)
    Z = (np.asarray(X, dtype=np.float64) - full.mean) / full.scale
    out = []
    for k in range(full.components.shape[0] + 1):
        C = full.components[:k]
        out.append(float(np.sqrt(np.mean((Z - Z @ C.T @ C) ** 2))))
    return out


def catalogue(family: str) -> tuple[tuple[str, ...], np.ndarray]:
    """``(feature names, feature matrix)`` of a family's catalogue."""
    if family == "cpu":
        from tunebench.methods.tensor_programs.glimpse import cpu_specs

        return cpu_specs.FEATURES, cpu_specs.catalogue_features()
    if family == "gpu":
        from tunebench.methods.tensor_programs.glimpse import gpu_specs

        return tuple(gpu_specs.FEATURES), np.stack([gpu_specs.gpu_features(s) for s in gpu_specs.gpu_table()])
    raise UserError(f"Blueprint family {family!r}; valid: {', '.join(FAMILIES)}")


@dataclass(frozen=True)
class Hardware:
    """A device as Glimpse sees it: its family, a name (``haswell/2t``, a GPU tag) and raw features."""

    family: str
    name: str
    features: tuple[float, ...]


def hardware_of(tvm_target: dict | None, device_name: str = "") -> Hardware:
    """The hardware a TVM target dict describes (``{"kind": "llvm", "mcpu": ..., "num-cores": ...}``, or a
    CUDA target with the GPU's ``device_name``). Raises UserError when it has no specification sheet."""
    kind = (tvm_target or {}).get("kind")
    if kind == "llvm":
        from tunebench.methods.tensor_programs.glimpse.cpu_specs import cpu_features, variant_name

        mcpu, threads = str(tvm_target.get("mcpu") or "x86-64"), int(tvm_target.get("num-cores") or 1)
        return Hardware("cpu", variant_name(mcpu, threads), tuple(cpu_features(mcpu, threads)))
    if kind == "cuda":
        from tunebench.methods.tensor_programs.glimpse import gpu_specs

        spec = gpu_specs.spec_for_device_name(device_name)
        if spec is None:
            raise UserError(f"method=glimpse: no datasheet for the GPU {device_name!r} (data/glimpse/gpus.csv has "
                            f"{len(gpu_specs.gpu_table())} GPUs; add its row to use it)")
        return Hardware("gpu", spec.tag, tuple(gpu_specs.gpu_features(spec)))
    raise UserError(f"method=glimpse: no Blueprint for a {kind or 'non-TVM'} target; valid: llvm (CPU variants), "
                    "cuda (GPUs of data/glimpse/gpus.csv)")


def blueprint(pca: PCA, hw: Hardware, mode: str = "spec") -> np.ndarray:
    """The Blueprint of ``hw`` under ``pca`` (float32); ``mode="constant"``: zeros (the ablation)."""
    if mode == "constant":
        return np.zeros(pca.components.shape[0], dtype=np.float32)
    return pca.transform(np.asarray(hw.features)).astype(np.float32)
