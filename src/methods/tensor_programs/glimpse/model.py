"""A trained Glimpse: the Blueprint's PCA per hardware family and the three networks, in one weights-only
file (:mod:`tunebench.tensor_files`: a crafted file cannot run code; every key and shape is checked).

The networks read ``z = [Π, Θ]``: the layer vector (:func:`~tunebench.methods.tensor_programs.glimpse.encoding.layer_vector`)
and the Blueprint Θ = [family one-hot (cpu, gpu), the family's first ``dims`` PCA scores]. One file may
cover both families (the CPU variants' measurements and the GPUs' static validity); Θ of the ablation
(``blueprint_mode = "constant"``) is all zeros, in training and in tuning.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from tunebench.errors import UserError
from tunebench.methods.tensor_programs.glimpse.blueprint import FAMILIES, PCA, Hardware
from tunebench.methods.tensor_programs.glimpse.encoding import LAYER_DIM
from tunebench.methods.tensor_programs.glimpse.networks import AcquisitionNet, PriorNet, ValidityEnsemble
from tunebench.tensor_files import checked_state, first_line, load_tensor_file, require, save_tensor_file

FORMAT = "tunebench-glimpse-model-v1"
WHAT = "glimpse model"
TRAIN_HINT = "train one with `python -m tunebench glimpse train`"


@dataclass
class GlimpseModel:
    """The trained parts (see the module docstring). ``info``: what it was trained on (JSON-able)."""

    pcas: dict[str, PCA]
    dims: int
    blueprint_mode: str
    knob_dims: dict[str, int]
    validity_dims: dict[str, int]
    prior: PriorNet = field(init=False)
    acquisition: AcquisitionNet = field(init=False)
    validity: ValidityEnsemble = field(init=False)
    info: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.prior = PriorNet(self.z_dim, self.knob_dims)
        self.acquisition = AcquisitionNet(self.theta_dim)
        self.validity = ValidityEnsemble(self.z_dim, self.validity_dims)

    @property
    def theta_dim(self) -> int:
        return len(FAMILIES) + self.dims

    @property
    def z_dim(self) -> int:
        return LAYER_DIM + self.theta_dim

    def theta(self, hw: Hardware) -> np.ndarray:
        """Θ of ``hw`` (float32, :attr:`theta_dim`); UserError for a family the model was not trained on."""
        if self.blueprint_mode == "constant":
            return np.zeros(self.theta_dim, dtype=np.float32)
        if hw.family not in self.pcas:
            raise UserError(f"method.pretrained: the model knows {', '.join(self.pcas)} hardware, not {hw.family} "
                            f"({hw.name}); {TRAIN_HINT} on records of {hw.family} targets")
        scores = self.pcas[hw.family].transform(np.asarray(hw.features))[: self.dims]
        onehot = [1.0 if hw.family == f else 0.0 for f in FAMILIES]
        return np.concatenate([onehot, scores, np.zeros(self.dims - len(scores))]).astype(np.float32)

    def knob_problem(self, signature: dict[str, int]) -> str | None:
        """Why the prior cannot serve a space with these knobs (name -> value feature length), or None."""
        missing = [k for k in signature if k not in self.knob_dims]
        wrong = [k for k in signature if k in self.knob_dims and self.knob_dims[k] != signature[k]]
        if not missing and not wrong:
            return None
        trained = ", ".join(f"{k}({v})" for k, v in sorted(self.knob_dims.items()))
        asked = ", ".join(f"{k}({v})" for k, v in sorted(signature.items()))
        return (f"was trained for other knobs: it knows {trained}; the task's space has {asked} (names with their "
                f"feature lengths); {TRAIN_HINT} on records of this template")

    def z(self, kind: str, shape: dict, flops: int, hw: Hardware) -> torch.Tensor:
        """The networks' input [Π, Θ] for a layer on ``hw``."""
        from tunebench.methods.tensor_programs.glimpse.encoding import layer_vector

        return torch.as_tensor(np.concatenate([layer_vector(kind, shape, flops), self.theta(hw)]))

    def knob_log_probs(self, names: list[str], feats: list[np.ndarray], z: torch.Tensor) -> list[np.ndarray]:
        """Per knob, the prior's log-probability of each of its values (float64)."""
        with torch.no_grad():
            lp = self.prior.log_probs(z, {n: torch.as_tensor(f) for n, f in zip(names, feats)})
        return [lp[n].numpy().astype(np.float64) for n in names]

    def invalid_votes(self, names: list[str], feats: list[np.ndarray], z: torch.Tensor) -> list[tuple[int, np.ndarray]]:
        """Per knob with a predictor: ``(knob position, invalid vote of each of its values)``."""
        with torch.no_grad():
            return [(k, (self.validity.logits(n, torch.as_tensor(f), z) > 0).numpy())
                    for k, (n, f) in enumerate(zip(names, feats)) if n in self.validity_dims]

    # ---- files -------------------------------------------------------------------------------
    def save(self, path: str) -> None:
        meta = {"dims": self.dims, "blueprint_mode": self.blueprint_mode, "knob_dims": self.knob_dims,
                "validity_dims": self.validity_dims, "families": {f: p.components.shape[1] for f, p in
                                                                  self.pcas.items()}, "info": self.info}
        tensors = {f"{f}.{k}": torch.as_tensor(v) for f, p in self.pcas.items() for k, v in p.tensors().items()}
        for part in ("prior", "acquisition", "validity"):
            tensors.update({f"{part}.{k}": v for k, v in getattr(self, part).state_dict().items()})
        save_tensor_file(path, FORMAT, meta, tensors)

    @classmethod
    def load(cls, path: str) -> GlimpseModel:
        """The model in ``path``; a missing, corrupt or foreign file is a one-line UserError naming it."""
        meta, tensors = load_tensor_file(path, WHAT, FORMAT)
        dims, mode = meta.get("dims"), meta.get("blueprint_mode")
        require(isinstance(dims, int) and 0 < dims <= 64, WHAT, path, "dims must be an integer in 1..64")
        require(mode in ("spec", "constant"), WHAT, path, f"blueprint_mode {mode!r}; valid: spec, constant")
        knob_dims, validity_dims = meta.get("knob_dims"), meta.get("validity_dims")
        for name, d in (("knob_dims", knob_dims), ("validity_dims", validity_dims)):
            require(isinstance(d, dict) and all(isinstance(v, int) and 0 < v <= 64 for v in d.values()), WHAT, path,
                    f"{name} must map knob names to feature lengths")
        families = meta.get("families")
        require(isinstance(families, dict) and families and set(families) <= set(FAMILIES), WHAT, path,
                f"families must name some of {', '.join(FAMILIES)}")
        try:
            pcas = {f: PCA.from_tensors({k[len(f) + 1:]: v.double().numpy() for k, v in tensors.items()
                                         if k.startswith(f + ".pca.")}) for f in families}
            m = cls(pcas, dims, mode, knob_dims, validity_dims, info=dict(meta.get("info") or {}))
            for part in ("prior", "acquisition", "validity"):
                net = getattr(m, part)
                state = checked_state(net, tensors, part, WHAT, path, part, "its metadata")
                net.load_state_dict({k: v.float() for k, v in state.items()})
        except KeyError as exc:
            raise UserError(f"{WHAT} {path}: tensor {exc} missing") from None
        except (TypeError, RuntimeError, ValueError) as exc:
            raise UserError(f"{WHAT} {path}: unusable tensor ({first_line(exc)})") from None
        for f, p in pcas.items():
            require(p.mean.shape == (families[f],) and p.components.shape[1] == families[f], WHAT, path,
                    f"the {f} PCA's shapes do not match its {families[f]} features")
        return m


def model_problem(path: str, blueprint: str | None = None) -> str | None:
    """Why ``path`` is not a usable Glimpse model, in one line (None: it is); with ``blueprint``
    (``method.blueprint``), also when the model was trained with the other Blueprint mode."""
    try:
        model = GlimpseModel.load(path)
    except UserError as exc:
        reason = str(exc).removeprefix(f"{WHAT} {path}: ")
        return f"not a model of `python -m tunebench glimpse train`: {reason}"
    if blueprint is not None and model.blueprint_mode != blueprint:
        how = "with --constant-blueprint" if model.blueprint_mode == "constant" else "without --constant-blueprint"
        return (f"trained {how} (blueprint_mode {model.blueprint_mode}), not for method.blueprint={blueprint}; "
                f"set method.blueprint={model.blueprint_mode} or give a model trained for {blueprint}")
    return None
