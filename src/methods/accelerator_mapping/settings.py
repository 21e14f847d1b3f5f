"""Settings of the mapspace methods: ``mapspace_bo`` ([Dinh-MLArchSys23]) and ZigZag's mappers ``loma``
and ``salsa`` ([Mei-TC21], [Jung-AICAS23])."""

from __future__ import annotations

from dataclasses import dataclass

from tunebench.config.experiment import MethodSettings
from tunebench.config.knobs import FRACTION, NAME, NONNEG_INT, POS_INT, POS_NUM, bad, bounded, choice, join, knob, rule

ORDER_ENCODINGS = ("scores", "categorical")
GP_FEATURES = ("mapping", "encoding")


@dataclass
class MapspaceBOSettings(MethodSettings):
    """GP Bayesian optimization over the valid-by-construction encoding (docs/METHODS.md §mapspace_bo)."""

    name: str = knob("mapspace_bo", NAME, "the method")
    order_encoding: str = knob("scores", choice(*ORDER_ENCODINGS),
                               "loop orders as sorted per-dimension scores or as one categorical per level "
                               "([Dinh-MLArchSys23] §II-A; §III-A: categorical better for matmul, scores for conv)")
    gp_features: str = knob("mapping", choice(*GP_FEATURES),
                            "the GP's inputs: `mapping`, the mapping a point decodes to (per buffer level the log of "
                            "its tiles, per level each loop's place in the order), so that points decoding to one "
                            "mapping are one point to the GP (our choice; checked on 20 held-out seeds: "
                            "docs/DESIGN_NOTES.md §DNN accelerator mapping); `encoding`, the encoding's coordinates, "
                            "as GPTune sees them in [Dinh-MLArchSys23]")
    n_init: int = knob(8, POS_INT, "initial points from a scrambled Sobol sequence before the GP (our choice)")
    n_candidates: int = knob(2048, bounded(1, 65536), "points scored by the acquisition per proposal: half Sobol, "
                                                      "half perturbations of the best points (our choice); at most "
                                                      "65,536: their covariance with max_train=300 observations is "
                                                      "157 MB and a proposal 32x the default's time")
    n_perturbed: int = knob(5, POS_INT, "best points whose neighbourhoods are sampled (our choice)")
    perturb_sigma: float = knob(0.1, POS_NUM, "standard deviation of the Gaussian perturbations in the unit cube")
    perturb_share: float = knob(0.2, FRACTION, "share of a perturbed point's coordinates that move (at least one; "
                                               "our choice, as TuRBO [Eriksson-NeurIPS19]; checked on 10 held-out seeds: "
                                               "docs/DESIGN_NOTES.md §DNN accelerator mapping)")
    max_train: int = knob(300, rule(lambda v: isinstance(v, int) and v >= 8, "must be an integer >= 8"),
                          "most observations the GP is fitted on (the best half and the latest half): bounds a step")
    fit_maxiter: int = knob(100, POS_INT, "L-BFGS-B iterations of a GP fit (BoTorch's default: until converged; "
                                          "bounded here so that a step stays under 2 s at 100 observations)")
    sobol_samples: int = knob(128, NONNEG_INT, "base samples N of the surrogate's Sobol analysis (SALib; "
                                               "N (d + 2) GP means); 0: none")
    transfer_from: list[dict] = knob([], None, "hardware configurations to transfer from ([Dinh-MLArchSys23] §III-B): "
                                               "each a mapping of target knobs changed (e.g. {scratchpad_kib: 64}); "
                                               "[]: no transfer (a single-task GP)")
    transfer_samples: int = knob(32, POS_INT, "source observations per configuration: Sobol points of the encoding, "
                                              "evaluated by ZigZag inside the method (pre-training, our choice)")
    xi: float = knob(0.0, FRACTION, "least improvement expected improvement counts, in log units of the objective "
                                    "(0: any improvement; BoTorch's default)")

    def check(self, prefix: str) -> None:
        """Each ``transfer_from`` entry changes knobs of ``target=accel`` to valid values."""
        import dataclasses

        from tunebench.config.knobs import validate
        from tunebench.targets import target_class

        settings_cls = target_class("accel").Settings  # the settings class of the target it maps onto
        fields = {f.name for f in dataclasses.fields(settings_cls)} - {"name", "kind", "objectives", "scale"}
        for k, change in enumerate(self.transfer_from):
            at = join(prefix, f"transfer_from[{k}]")
            if not isinstance(change, dict) or not change or set(change) - fields:
                raise bad(at, change, f"must change knobs of target=accel; valid keys: {', '.join(sorted(fields))}")
            validate(dataclasses.replace(settings_cls(), **change), at)
