"""dgp's training objective in plain PyTorch: the ELBO of GPyTorch's
``DeepApproximateMLL(VariationalELBO(GaussianLikelihood, DeepGP, num_data))`` without GPyTorch's lazy
operators (docs/METHODS.md §dgp).

:meth:`DeepGP.fit <tunebench.methods.tensor_programs.dgp.model.DeepGP.fit>` evaluates the ELBO (and, in the
MAP transfer, its value on the whole tuning set) a few hundred times on a few hundred rows; in GPyTorch 1.15
most of that time went into building, sizing and differentiating lazy operators around small tensor
products, and into one Cholesky factor of the output layer's inducing covariance per Monte-Carlo draw (the
same matrix each time). :func:`elbo` computes the same quantity with the same random draws, per layer
(whitened ``VariationalStrategy`` with a ``CholeskyVariationalDistribution`` q(u) = N(m, S), S = L Lᵀ):

- ``K_ZZ + jitter`` (scaled ARD RBF kernel, the strategy's jitter), its Cholesky factor ``C`` by
  ``psd_safe_cholesky`` in GPyTorch's Cholesky dtype; ``A = C⁻¹ K_ZX`` solved in the dtype GPyTorch uses
  (float32 in training when the batch has more rows than inducing points, else the Cholesky dtype);
- mean ``μ(X) + Aᵀ m``; variance ``k(x, x) + jitter + ‖Lᵀ A‖² − ‖A‖²`` per column (the diagonal of
  ``K_XX + jitter + Aᵀ (S − I) A``), clamped at ``gpytorch.settings.min_variance``;
- the hidden layer's outputs drawn as ``DeepGPLayer`` draws them
  (``Normal(mean, sqrt(variance)).rsample()`` on shape (draws, rows, hidden), the same generator calls);
- ELBO = mean over draws of ``Σ E_q[log N(y | f, σ²)] / rows`` − ``Σ_layers KL(q(u) ‖ N(0, I)) / num_data``,
  ``E_q[log N(y | f, σ²)] = −½ (((y − μ)² + v) / σ² + log σ² + log 2π)``,
  ``KL = ½ (‖m‖² + ‖L‖²_F − M − 2 Σ log|diag L|)``.

Not bit-identical to GPyTorch: the same terms summed in another order and the output layer's factor computed
once for all draws (GPyTorch's has one per draw, of the same matrix), so values and gradients differ by
float rounding (tests/methods/test_dgp_lean_elbo.py compares them on random models). Where a precondition does
not hold (a model with other parts, a strategy not yet initialized or whitened) :func:`elbo` returns None
before it draws, and the caller takes GPyTorch's path.
"""

from __future__ import annotations

import math

import torch
from gpytorch import settings
from gpytorch.likelihoods import GaussianLikelihood
from gpytorch.means import ConstantMean, LinearMean
from gpytorch.variational import CholeskyVariationalDistribution, VariationalStrategy
from linear_operator.utils.cholesky import psd_safe_cholesky

_LOG_2PI = math.log(2 * math.pi)


def strategy_ready(strategy) -> bool:
    """Whether a layer's variational strategy has been initialized and whitened (GPyTorch does both on the
    first call in train mode): what both lean paths (this module, ``fast_predict``) need before they apply."""
    return bool(strategy.updated_strategy.item()) and bool(strategy.variational_params_initialized.item())


def hidden_draws(mean: torch.Tensor, var: torch.Tensor, samples: int) -> torch.Tensor:
    """The hidden layer's outputs drawn as ``DeepGPLayer`` draws them: ``Normal(mean, sqrt(variance)).rsample()``
    on shape (draws, rows, hidden), from ``mean`` and ``var`` of shape (hidden, rows)."""
    shape = (int(samples), mean.size(-1), mean.size(-2))
    return torch.distributions.Normal(loc=mean.mT.expand(shape), scale=var.mT.sqrt().expand(shape)).rsample()


def _ready(model) -> bool:
    """Whether ``model`` is the two-layer deep GP this module computes, initialized and whitened."""
    if type(model.likelihood) is not GaussianLikelihood or model.output.output_dims is not None:
        return False
    if any(True for _ in model.named_priors()) or any(True for _ in model.added_loss_terms()):
        return False
    for layer in (model.hidden, model.output):
        s = layer.variational_strategy
        if not isinstance(s, VariationalStrategy) or type(s._variational_distribution) is not CholeskyVariationalDistribution:
            return False
        if not strategy_ready(s):
            return False
        if not isinstance(layer.mean_module, (LinearMean, ConstantMean)):
            return False
    return True


def _rbf(kernel, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``outputscale · exp(−‖a − b‖² / 2)`` with ARD lengthscales (GPyTorch's ``ScaleKernel(RBFKernel)``)."""
    ls = kernel.base_kernel.lengthscale
    a, b = a.div(ls), b.div(ls)
    shift = a.mean(-2, keepdim=True)  # centred, as GPyTorch's sq_dist, for accuracy
    a, b = a - shift, b - shift
    sq = a.pow(2).sum(-1, keepdim=True) - 2 * a @ b.mT + b.pow(2).sum(-1).unsqueeze(-2)
    return kernel.outputscale[..., None, None] * sq.clamp_min(0).div(-2).exp()


def _layer(layer, x: torch.Tensor, training: bool, lower: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(mean, variance) of ``layer``'s q(f) at ``x``: (..., n, d) for a layer whose inducing points ``z``
    have shape (batch..., m, d) and whose q(u) has the Cholesky factor ``lower``; the inducing covariance is
    factored once, shared by x's leading dims."""
    s = layer.variational_strategy
    z = s.inducing_points
    m, n = z.size(-2), x.size(-2)
    kern = layer.covar_module
    k_zz = _rbf(kern, z, z)
    k_zz = k_zz + s.jitter_val * torch.eye(m, dtype=k_zz.dtype)
    chol = psd_safe_cholesky(k_zz.type(settings._linalg_dtype_cholesky.value()))
    k_zx = _rbf(kern, z, x)
    dtype = k_zx.dtype if (training and m < n) else chol.dtype  # as VariationalStrategy's two branches
    flat = chol.dim() == 2 and k_zx.dim() > 2  # one factor for all of x's leading dims: one solve, (m, ... · n)
    rhs = k_zx.type(dtype).movedim(-2, 0).reshape(m, -1) if flat else k_zx.type(dtype)
    interp = torch.linalg.solve_triangular(chol.type(dtype), rhs, upper=False).type(k_zx.dtype)
    if flat:
        interp = interp.reshape(m, *k_zx.shape[:-2], n).movedim(0, -2)
    q = s._variational_distribution
    mean = layer.mean_module(x) + (interp.mT @ q.variational_mean.unsqueeze(-1)).squeeze(-1)
    quad = (lower.mT @ interp).pow(2).sum(-2) - interp.pow(2).sum(-2)
    var = kern.outputscale.unsqueeze(-1) + s.jitter_val + quad
    return mean, var.clamp_min(settings.min_variance.value(var.dtype))


def _kl(layer, lower: torch.Tensor) -> torch.Tensor:
    """Σ over the layer's GPs of KL(q(u) ‖ N(0, I)), q(u) = N(m, L Lᵀ) whitened (``lower`` = L)."""
    q = layer.variational_strategy._variational_distribution
    logdet = 2 * lower.diagonal(dim1=-2, dim2=-1).abs().log().sum(-1)
    trace_quad = q.variational_mean.pow(2).sum(-1) + lower.pow(2).sum((-2, -1))
    return (0.5 * (trace_quad - logdet - lower.size(-1))).sum()


def elbo(model, x: torch.Tensor, y: torch.Tensor, num_data: int, samples: int, training: bool) -> torch.Tensor | None:
    """GPyTorch's ``DeepApproximateMLL(VariationalELBO(model.likelihood, model, num_data))(model(x), y)``
    with ``samples`` likelihood samples (the same random draws), as a differentiable scalar; ``training``:
    the model's mode (it chooses the dtype of the interpolation solve as GPyTorch does). None where this
    path does not apply (checked before any draw)."""
    if not _ready(model):
        return None
    h = model.hidden.output_dims
    low_h, low_o = (layer.variational_strategy._variational_distribution.chol_variational_covar.tril()
                    for layer in (model.hidden, model.output))
    mean, var = _layer(model.hidden, x.unsqueeze(-3).expand(h, *x.shape), training, low_h)
    draws = hidden_draws(mean, var, samples)
    f_mean, f_var = _layer(model.output, draws, training, low_o)
    noise = model.likelihood.noise.squeeze(-1)
    ell = ((y - f_mean).square() + f_var).div(noise).add(noise.log()).add(_LOG_2PI).mul(-0.5)
    kl = _kl(model.hidden, low_h) + _kl(model.output, low_o)
    return (ell.sum(-1).div(x.size(-2)) - kl.div(num_data)).mean(0)
