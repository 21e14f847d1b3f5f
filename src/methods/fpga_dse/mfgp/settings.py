"""Hyperparameters of the multi-fidelity GP Bayesian-optimization methods ``method=cgp``, ``dcgp``,
``fpl18`` and ``mes`` ([Sun-PhD] Ch. 3; docs/METHODS.md §cgp, §dcgp, §fpl18, §mes; citations:
docs/REFERENCES.md).

Code: ``src/methods/fpga_dse/mfgp/<name>.py`` -> ``src/methods/fpga_dse/mfgp/`` (models.py, acquisition.py, mfbo.py).
:class:`MFBOSettings` declares every knob once, with cgp's defaults and their sources; each method's
class changes only what its method does differently.

They need an FPGA target (fpga_open, vivado, table): several objectives and fidelities. Give the budget
room: trials_per_task >= the pruned space (evaluated at a free fidelity) + 2 x n_init + 2 x max_iterations
+ the final predicted Pareto set (every evaluation at any fidelity is one trial; budget=fpga gives 400).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from tunebench.config.experiment import MethodSettings
from tunebench.config.knobs import (
    FRACTION,
    NAME,
    NONNEG_INT,
    NONNEG_NUM,
    POS_INT,
    POS_NUM,
    bad,
    choice,
    each,
    is_int,
    is_num,
    knob,
    opt,
    rule,
)

MODEL = choice("icm", "independent")
CHAINING = choice("nargp", "ar1")
OPTIMIZER = choice("lbfgs", "adam")
ACQUISITION = choice("eipv", "mes")
DEEP_KERNEL = opt(each(POS_INT, "must be a list of positive layer widths"))


def _n_init(v) -> bool:
    return (is_int(v) and v > 0) or (isinstance(v, (list, tuple)) and len(v) > 0
                                      and all(is_int(x) and x > 0 for x in v))


def _ref_point(v) -> bool:
    return is_num(v) or (isinstance(v, (list, tuple)) and len(v) > 0 and all(is_num(x) for x in v))


@dataclass
class MFBOSettings(MethodSettings):
    """The knobs of the multi-fidelity BO driver (``mfbo.MultiFidelityBO``, [Sun-PhD] Alg. 2), with
    cgp's defaults."""

    OPEN_KEYS: ClassVar[tuple[str, ...]] = ("capacity_overrides",)

    # ---- loop ([Sun-PhD] §3.6.4, Alg. 2) ----
    n_init: Any = knob(8, rule(_n_init, "must be a positive integer or a list of them (one per fidelity, "
                                        "cheapest first)"),
                       "[Sun-PhD] §3.6.4: 8 random initial designs; an int = the same 8 at every fidelity (nested, "
                       "Alg. 2 line 4); a list: one count per fidelity, cheapest first")
    max_init_fraction: float | None = knob(0.25, opt(FRACTION),
                                           "as ann/bt/dac19: at most 25% of the pruned space (at least 2 designs) "
                                           "per fidelity; binds only on small spaces (ours: GEMM 216, conv 180, "
                                           "SpMV 144 configs); null = no cap")
    max_iterations: int = knob(40, POS_INT, "[Sun-PhD] §3.6.4: maximum optimization step 40 (BO iterations after "
                                            "the initial designs)")
    patience: int = knob(5, POS_INT, "[Sun-PhD] §3.6.4: early-stopping factor 5 (consecutive iterations without "
                                     "top-fidelity HV gain, Alg. 2 l. 17)")
    patience_scope: str = knob("all", choice("all", "top"),
                               "[Sun-PhD] Alg. 2 l. 17 as stated: every iteration without top-fidelity HV gain "
                               "counts (top = only iterations that evaluated the top fidelity count: a cheaper "
                               "fidelity's iteration cannot change its HV)")
    measure_lower: bool = knob(True, None, "[Sun-PhD] §3.5, Alg. 2 l. 13: \"run the FPGA tool up to stage h\": a "
                                           "design chosen at fidelity h is also evaluated at the cheaper fidelities")
    max_candidates: int = knob(2000, POS_INT, "our choice: score at most 2000 random unmeasured designs per "
                                              "fidelity per iteration (our pruned spaces are smaller)")

    # ---- model ([Sun-PhD] §3.4.1-3.4.2) ----
    model: str = knob("icm", MODEL, "[Sun-PhD] Eq. 3.14: intrinsic coregionalization over objectives x ARD "
                                    "Matern-5/2 (eq. 3.16); independent = one GP per objective")
    task_rank: int | None = knob(None, opt(POS_INT),
                                 "our choice: null = full-rank objective covariance B = W W^T + diag(v), W of rank "
                                 "M (the thesis learns K_ij freely); an int: the rank of W. ICM only (unused by "
                                 "fpl18, mes)")
    chaining: str = knob("nargp", CHAINING, "[Sun-PhD] Eq. 3.9: lower fidelity's posterior mean concatenated to x, "
                                            "kernel k_x k_f + k_e (NARGP); ar1 = the linear link")
    deep_kernel: list[int] | None = knob(None, DEEP_KERNEL, "cgp: shallow kernel (null); dcgp sets the MLP's layer "
                                                            "widths")
    optimizer: str = knob("lbfgs", OPTIMIZER, "[Sun-PhD] Eq. 3.8 (\"gradient-based\"): exact marginal likelihood, "
                                              "full-batch L-BFGS (strong Wolfe)")
    fit_steps: int = knob(30, POS_INT, "our choice: L-BFGS iterations of a first fit (<= ~60 points; keeps the "
                                       "160-run sweep < 1 h)")
    refit_steps: int = knob(10, NONNEG_INT, "our choice: L-BFGS iterations (dcgp: Adam steps) of a later fit, "
                                            "warm-started from the previous iteration's hyperparameters (algorithm "
                                            "time: sweep < 1 h)")
    lr: float = knob(0.01, POS_NUM, "Adam only (unused with lbfgs): its step size; our choice for dcgp (GPyTorch "
                                    "deep-kernel examples use 0.01)")
    weight_decay: float = knob(0.0, NONNEG_NUM, "Adam only (unused with lbfgs); our choice for dcgp: none (the "
                                                "thesis states no regularization)")

    # ---- acquisition ([Sun-PhD] §3.4.2-3.4.3) ----
    acquisition: str = knob("eipv", ACQUISITION,
                            "[Sun-PhD] Eqs. 3.11-3.12: expected improvement of Pareto hypervolume over box cells; "
                            "fpl18 too (our choice: the same PEIPV as cgp, so only the model differs; [Sun-PhD] "
                            "§3.6.3 compares the models)")
    eipv_samples: int = knob(128, POS_INT, "our choice: scrambled-Sobol draws per candidate for the correlated "
                                           "(non-diagonal) EIPV; unused by independent objectives (fpl18: exact "
                                           "EIPV, diagonal covariance) and by MES")
    mes_samples: int = knob(10, POS_INT, "MES only (unused by EIPV); our choice: sampled objective-minimum vectors "
                                         "per iteration (MESMO uses a few)")
    mes_pool: int = knob(500, POS_INT, "MES only (unused by EIPV); our choice: candidates over which each objective "
                                       "is jointly sampled")
    fidelity_weighting: str = knob("cost", choice("cost", "none"),
                                   "[Sun-PhD] Eq. 3.15: PEIPV_i = rho_i EIPV_i, rho_i = T_impl / T_i (T_i cumulative "
                                   "tool time to stage i); mes: our choice, the same weighting (\"same experimental "
                                   "settings\", §3.6.6); none: rho_i = 1")
    stage_seconds: list[float] | None = knob(None, opt(each(NONNEG_NUM, "must be a list of seconds >= 0")),
                                             "null: T_i from the running means of the stage seconds measured in "
                                             "this task once every fidelity has one, before that from the target's "
                                             "declared costs; or a list of seconds per stage, cheapest first (used "
                                             "instead of both)")
    min_stage_s: float = knob(0.001, POS_NUM, "our choice: floor on T_i (seconds) so an instantaneous stage cannot "
                                              "divide by zero")
    rho_max: float | None = knob(None, opt(POS_NUM), "[Sun-PhD] Eq. 3.15: rho_i = T_impl / T_i from the costs, no "
                                                     "cap (a number caps it)")
    free_fidelity_ratio: float | None = knob(
        0.01, opt(rule(lambda v: is_num(v) and 0 <= v < 1, "must be in [0, 1)")),
        "our rule (docs/METHODS.md §cgp): a fidelity costing <= 1 % of impl (our analytical estimate: ms against "
        "~10-60 s) is evaluated for every design up front, used as the chain's lowest level and never chosen by "
        "PEIPV; null = every fidelity is a choice ([Sun-PhD]'s HLS costs minutes)")
    final_pareto: bool = knob(True, None, "[Sun-PhD] §3.6.3: the learned set is the predicted Pareto designs run "
                                          "through the flow; when the loop stops, the top fidelity's predicted Pareto "
                                          "set is evaluated at impl (remaining trials only; final_set.py)")
    final_beta: float = knob(1.0, NONNEG_NUM, "our choice: optimistic bound mean - beta x std picks that set (0 = "
                                              "posterior mean)")
    ref_point: Any = knob(1.0, rule(_ref_point, "must be a number or a list of numbers (one per objective)"),
                          "our choice: HV reference in normalized units (delay 2x the initial max, resources = full "
                          "device); a number is the same for every objective, a list gives one per objective")

    # ---- normalization ([Sun-PhD] §3.6.3, §3.4.3; objectives.py) ----
    delay_factor: float = knob(2.0, POS_NUM, "[Sun-PhD] §3.6.3: delay divided by 2x the maximum delay of the "
                                             "initial designs")
    invalid_factor: float = knob(10.0, POS_NUM, "[Sun-PhD] §3.4.3: designs without a valid report scored 10x the "
                                                "current worst")
    capacity_overrides: dict[str, float] = knob(
        {}, rule(lambda v: isinstance(v, dict) and all(is_num(x) and x > 0 for x in v.values()),
                 "must map objective names to positive scales"),
        "resources are divided by the target's capacity (target_info.capacity); {objective: scale} overrides")
    num_threads: int = knob(1, POS_INT, "our choice: torch threads; GP algebra on <= ~200x200 matrices runs fastest "
                                        "on one (2 shared cores)")

    def check(self, prefix: str) -> None:
        model = f"{prefix}.model"
        if self.chaining == "ar1" and self.model != "independent":
            raise bad(f"{prefix}.chaining", self.chaining, f"needs {model}=independent (the AR1 link is per "
                                                           "objective)")
        if self.acquisition == "mes" and self.model != "independent":
            raise bad(f"{prefix}.acquisition", self.acquisition, f"needs {model}=independent (MES samples each "
                                                                 "objective)")
        if self.deep_kernel is not None and self.model != "icm":
            raise bad(f"{prefix}.deep_kernel", self.deep_kernel, f"needs {model}=icm")


@dataclass
class CGPSettings(MFBOSettings):
    """Correlated multi-objective, non-linear multi-fidelity GP BO ([Sun-PhD] Ch. 3; docs/METHODS.md §cgp):
    :class:`MFBOSettings`'s defaults."""

    name: str = knob("cgp", NAME, "the method")


@dataclass
class DCGPSettings(CGPSettings):
    """cgp with a deep kernel (DCGP) ([Sun-PhD] Ch. 3, §3.4.4; docs/METHODS.md §dcgp)."""

    name: str = knob("dcgp", NAME, "the method")
    deep_kernel: list[int] | None = knob([1000, 500, 50, 6], DEEP_KERNEL,
                                         "[Sun-PhD] §3.6.3: four FC layers, outputs 1000, 500, 50, 6; ReLU after "
                                         "the first three")
    optimizer: str = knob("adam", OPTIMIZER, "[Sun-PhD] Eq. 3.19: W and the GP hyperparameters jointly by "
                                             "back-propagation of the MLL (Adam)")
    fit_steps: int = knob(50, POS_INT, "our choice: Adam steps of a first fit ([Sun-PhD] Fig. 3.14 shows "
                                       "convergence, gives no count)")


@dataclass
class FPL18Settings(MFBOSettings):
    """FPL18 ([FPL18]: Lo & Chow, FPL 2018): linear AR1 multi-fidelity BO with independent GPs per objective
    ([Sun-PhD] Ch. 3; docs/METHODS.md §fpl18)."""

    name: str = knob("fpl18", NAME, "the method")
    model: str = knob("independent", MODEL, "[Sun-PhD] §3.1, §3.6.3: FPL18 models the objectives independently "
                                            "(one ARD Matern-5/2 GP each)")
    chaining: str = knob("ar1", CHAINING, "[Sun-PhD] §3.4.1: \"higher fidelity scales the lower fidelity output by "
                                          "a factor and adds an independent GP\"")


@dataclass
class MESSettings(MFBOSettings):
    """Max-value entropy search with independent GPs inside the cgp loop (ablation, [Sun-PhD] §3.6.6, Table
    3.5; docs/METHODS.md §mes)."""

    name: str = knob("mes", NAME, "the method")
    model: str = knob("independent", MODEL, "[Sun-PhD] §3.6.6: \"M independent GP models with zero mean and "
                                            "i.i.d. noise\"")
    acquisition: str = knob("mes", ACQUISITION, "[Sun-PhD] §3.6.6: MES ([MESMO]) in place of the correlated "
                                                "acquisition")
