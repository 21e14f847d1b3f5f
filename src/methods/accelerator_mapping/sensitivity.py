"""Sobol sensitivity of the surrogate ([Dinh-MLArchSys23] §III-C; [Sobol-MCS01] indices computed by SALib,
[Herman-JOSS17]): how much of the variance of the GP's mean over the unit cube each input explains, and
the tile inputs against the loop-order inputs."""

from __future__ import annotations

import numpy as np

from tunebench.methods.accelerator_mapping.surrogate import posterior_mean


def sobol_report(model, enc, n_base: int, seed: int, inputs=None) -> dict:
    """Total-order Sobol indices of the surrogate's mean over the encoding's inputs: summed over the tile
    and the order inputs, the largest three with their names, and every input's (``sobol_st``, a dict).
    ``inputs``: the GP's view of points of the encoding (default ``enc.gp_inputs``)."""
    from SALib.analyze import sobol as analyze
    from SALib.sample import sobol as sample

    names = enc.names()
    problem = {"num_vars": enc.d, "names": names, "bounds": [[0.0, 1.0]] * enc.d}
    base = 1 << max(1, int(np.ceil(np.log2(max(n_base, 2)))))  # Sobol sequences want a power of two
    X = sample.sample(problem, base, calc_second_order=False, seed=seed % (2**31))
    Y = posterior_mean(model, (inputs or enc.gp_inputs)(np.clip(X, 1e-6, 1.0)))
    res = analyze.analyze(problem, Y, calc_second_order=False, num_resamples=20, seed=seed % (2**31))
    st = np.clip(np.nan_to_num(np.asarray(res["ST"], dtype=float)), 0.0, None)
    tiles, orders = st[:enc.n_tile].sum(), st[enc.n_tile:].sum()
    top = np.argsort(-st)[:3]
    return {"sobol_tiles_st": float(tiles), "sobol_order_st": float(orders),
            "sobol_top": [f"{names[i]}={st[i]:.3f}" for i in top],
            "sobol_st": {n: round(float(v), 4) for n, v in zip(names, st)}, "sobol_evaluations": int(len(Y))}
