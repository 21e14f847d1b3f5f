"""Acquisition functions over a discrete candidate set, all for MINIMIZED objectives.

* Pareto front and hypervolume (``pareto_mask``, ``hypervolume``), BoTorch's exact algorithms.
* Box decomposition of the non-dominated region (``nondominated_cells``), BoTorch's
  ``FastNondominatedPartitioning`` mapped to minimization.
* EIPV, the expected improvement of Pareto hypervolume ([Sun-PhD] Eqs. 3.10-3.12):
  ``eipv_independent`` (exact, diagonal predictive covariance) and ``eipv_qmc`` (correlated
  objectives, quasi-Monte-Carlo over the full M x M predictive covariance of each candidate).
* PEIPV = rho_i * EIPV_i with rho_i = T_impl / T_i ([Sun-PhD] Eq. 3.15): ``fidelity_weights``.
* Max-value entropy search with independent GPs ([MESMO], [Sun-PhD] §3.6.6): ``mes``.
"""

from __future__ import annotations

import math

import torch
from botorch.utils.multi_objective.box_decompositions.non_dominated import FastNondominatedPartitioning
from botorch.utils.multi_objective.hypervolume import Hypervolume
from botorch.utils.multi_objective.pareto import is_non_dominated

_SQRT2 = math.sqrt(2.0)


def _t(a) -> torch.Tensor:
    return torch.as_tensor(a, dtype=torch.float64)


def pareto_mask(Y) -> torch.Tensor:
    """Bool mask [n] of the non-dominated rows of ``Y`` [n, M] (minimization; duplicates kept once)."""
    Y = _t(Y)
    if Y.shape[0] == 0:
        return torch.zeros(0, dtype=torch.bool)
    return is_non_dominated(-Y, deduplicate=True)


def hypervolume(Y, ref) -> float:
    """Hypervolume dominated by the rows of ``Y`` [n, M] and bounded by ``ref`` [M] (minimization).

    Rows not strictly better than ``ref`` in every objective contribute nothing.
    """
    Y, ref = _t(Y), _t(ref)
    if Y.shape[0] == 0:
        return 0.0
    Y = Y[(Y < ref).all(dim=-1)]
    if Y.shape[0] == 0:
        return 0.0
    return float(Hypervolume(-ref).compute(-Y[pareto_mask(Y)]))


def nondominated_cells(Y, ref) -> tuple[torch.Tensor, torch.Tensor]:
    """Disjoint boxes covering the region that ``ref`` bounds and no row of ``Y`` dominates.

    Returns:
        (lower, upper), each [K, M]; ``lower`` may hold ``-inf``. A point y improves the
        hypervolume by ``sum_k prod_m max(0, upper_km - max(lower_km, y_m))``.
    """
    Y, ref = _t(Y), _t(ref)
    if Y.shape[0]:
        Y = Y[(Y < ref).all(dim=-1)]
    if Y.shape[0] == 0:
        return torch.full_like(ref, -math.inf)[None], ref[None].clone()
    bounds = FastNondominatedPartitioning(ref_point=-ref, Y=-Y).get_hypercell_bounds()  # [2, K, M], maximization
    lower, upper = -bounds[1], -bounds[0]
    keep = (upper > lower).all(dim=-1)
    return lower[keep], upper[keep]


def _ei_1d(mu: torch.Tensor, sigma: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """E[max(0, b - max(a, Y))] for Y ~ N(mu, sigma^2), elementwise (a may be -inf, a < b)."""
    sigma = sigma.clamp_min(1e-12)
    normal = torch.distributions.Normal(torch.zeros((), dtype=mu.dtype), torch.ones((), dtype=mu.dtype))
    alpha, beta = (a - mu) / sigma, (b - mu) / sigma
    cdf_a, cdf_b = normal.cdf(alpha), normal.cdf(beta)
    pdf_a, pdf_b = normal.log_prob(alpha).exp(), normal.log_prob(beta).exp()
    below = torch.where(torch.isfinite(a), (b - a) * cdf_a, torch.zeros_like(mu))   # Y <= a: gain b - a
    inside = (b - mu) * (cdf_b - cdf_a) + sigma * (pdf_b - pdf_a)                     # a < Y < b: gain b - Y
    return (below + inside).clamp_min(0.0)


def eipv_independent(mean, std, lower, upper) -> torch.Tensor:
    """Exact EIPV [N] for independent Gaussian objectives.

    Args:
        mean, std: [N, M] predictive means and standard deviations.
        lower, upper: [K, M] non-dominated cells (``nondominated_cells``).
    """
    mean, std, lower, upper = _t(mean), _t(std), _t(lower), _t(upper)
    g = _ei_1d(mean[:, None, :], std[:, None, :], lower[None], upper[None])  # [N, K, M]
    return g.prod(dim=-1).sum(dim=-1)


def normal_base_samples(n_samples: int, M: int, seed: int = 0) -> torch.Tensor:
    """[n_samples, M] scrambled-Sobol quasi-random standard normal draws (common random numbers)."""
    sobol = torch.quasirandom.SobolEngine(M, scramble=True, seed=seed).draw(n_samples, dtype=torch.float64)
    sobol = sobol.clamp(1e-9, 1 - 1e-9)
    return _SQRT2 * torch.erfinv(2 * sobol - 1)


def hv_improvement(samples, lower, upper) -> torch.Tensor:
    """Hypervolume improvement of each sample point [..., M] given the cells [K, M]: shape [...]."""
    samples = _t(samples)
    gain = (upper - torch.maximum(lower, samples[..., None, :])).clamp_min(0.0)  # [..., K, M]
    return gain.prod(dim=-1).sum(dim=-1)


def eipv_qmc(mean, cov, lower, upper, n_samples: int = 128, seed: int = 0, chunk: int = 256) -> torch.Tensor:
    """EIPV [N] for correlated objectives by quasi-Monte-Carlo over each candidate's M x M covariance.

    Args:
        mean: [N, M]; cov: [N, M, M] predictive covariance of the objectives at each candidate
            (the ICM model's non-diagonal Sigma of [Sun-PhD] Eq. 3.14).
        n_samples: quasi-random draws per candidate (the same draws for every candidate).
    """
    mean, cov, lower, upper = _t(mean), _t(cov), _t(lower), _t(upper)
    N, M = mean.shape
    z = normal_base_samples(n_samples, M, seed)                               # [S, M]
    jitter = 1e-10 * torch.eye(M, dtype=torch.float64)
    L = torch.linalg.cholesky_ex(cov + jitter)[0]                             # [N, M, M]
    bad = ~torch.isfinite(L).all(dim=(-1, -2))
    if bad.any():  # fall back to the diagonal where a covariance is numerically indefinite
        L[bad] = torch.diag_embed(cov[bad].diagonal(dim1=-2, dim2=-1).clamp_min(0).sqrt())
    out = torch.empty(N, dtype=torch.float64)
    for s in range(0, N, chunk):
        y = mean[s:s + chunk, None, :] + torch.einsum("nij,sj->nsi", L[s:s + chunk], z)  # [n, S, M]
        out[s:s + chunk] = hv_improvement(y, lower, upper).mean(dim=-1)
    return out


def fidelity_weights(stage_s: list[float]) -> list[float]:
    """rho_i = T_top / T_i with T_i the cumulative tool time from scratch to stage i ([Sun-PhD] Eq. 3.15).

    Args:
        stage_s: mean tool seconds of each stage alone, cheapest fidelity first (all > 0).
    """
    if any(not (t > 0) for t in stage_s):
        raise ValueError(f"stage times must be positive, got {stage_s}")
    cumulative = [sum(stage_s[:i + 1]) for i in range(len(stage_s))]
    return [cumulative[-1] / t for t in cumulative]


def sample_min_values(mean, cov_by_objective, n_samples: int, generator: torch.Generator) -> torch.Tensor:
    """Minimum of each objective over the candidates, per joint posterior sample: [n_samples, M].

    Args:
        mean: [N, M]; cov_by_objective: [M, N, N] joint posterior covariance of each objective
            over the candidate set (independent objectives).
    """
    mean, cov = _t(mean), _t(cov_by_objective)
    N, M = mean.shape
    eye = torch.eye(N, dtype=torch.float64)
    mins = torch.empty(n_samples, M, dtype=torch.float64)
    for j in range(M):
        jitter = 1e-8 * cov[j].diagonal().mean().clamp_min(1e-12)
        L, info = torch.linalg.cholesky_ex(cov[j] + jitter * eye)
        if info != 0:  # eigen-decomposition fallback for a numerically singular covariance
            w, V = torch.linalg.eigh(cov[j])
            L = V * w.clamp_min(0).sqrt()
        z = torch.randn(N, n_samples, dtype=torch.float64, generator=generator)
        mins[:, j] = (mean[:, j:j + 1] + L @ z).min(dim=0).values
    return mins


def mes(mean, std, min_values) -> torch.Tensor:
    """Max-value entropy search for minimization ([MESMO]) [N].

    alpha(x) = 1/S sum_s sum_j [gamma phi(gamma) / (2 Phi(gamma)) - log Phi(gamma)],
    gamma = (mu_j(x) - y*_sj) / sigma_j(x), with y*_sj the sampled minimum of objective j.

    Args:
        mean, std: [N, M]; min_values: [S, M] from ``sample_min_values``.
    """
    mean, std, min_values = _t(mean), _t(std).clamp_min(1e-12), _t(min_values)
    gamma = (mean[:, None, :] - min_values[None]) / std[:, None, :]        # [N, S, M]
    normal = torch.distributions.Normal(torch.zeros((), dtype=torch.float64), torch.ones((), dtype=torch.float64))
    log_cdf = torch.special.log_ndtr(gamma)
    pdf = normal.log_prob(gamma).exp()
    term = gamma * pdf / (2 * log_cdf.exp().clamp_min(1e-300)) - log_cdf
    return term.sum(dim=-1).mean(dim=-1)
