"""dgp's predictive mean without GPyTorch's lazy-operator bookkeeping (docs/METHODS.md §dgp).

:meth:`DeepGP.predict_mean <tunebench.methods.tensor_programs.dgp.model.DeepGP.predict_mean>` runs for every simulated
annealing step (128 configs, 16 draws), and most of its time in GPyTorch 1.15 went into building and
sizing lazy operators (sums, block diagonals, batch expansions) around a few small tensor products, and into
the output layer's dense covariance update, which the mean never reads. :func:`mean_of` computes the same
numbers with the same tensor operations in the same order, on the same kernel and Cholesky objects:

- each layer: GPyTorch's ``VariationalStrategy.forward`` in eval mode (the kernel of inducing points and
  inputs, the cached Cholesky factor, the interpolation term solved in its dtype, mean = prior mean +
  interpolation term × whitened variational mean);
- the hidden layer's variance: the diagonal of ``K_XX + jitter`` plus that of
  ``K_XZ L⁻ᵀ (S − I) L⁻¹ K_ZX`` (``(A * Bᵀ).sum(-1)``, as ``MatmulLinearOperator`` takes it), clamped
  as ``MultivariateNormal.variance`` clamps, computed once instead of once per draw (the draws of a
  deterministic input share it);
- the draws: ``torch.distributions.Normal(mean, sqrt(variance)).rsample()`` on the draws' shape, as
  ``DeepGPLayer`` takes them (the same random numbers from the same generator state).

The test (tests/methods/test_dgp_fast_predict.py) checks the result against GPyTorch's own path to the
bit. Where a precondition does not hold (a strategy not yet whitened, a Cholesky factor of another batch
shape), :func:`mean_of` returns None, before it draws, and the caller takes GPyTorch's path.
"""

from __future__ import annotations

import torch
from gpytorch import settings
from gpytorch.utils.memoize import _get_from_cache_ignore_args, _is_in_cache_ignore_args
from linear_operator.operators import SumLinearOperator


def _ready(layer, batch: tuple) -> bool:
    """Whether ``layer``'s strategy is in eval mode, whitened, with its Cholesky factor cached for inputs of
    batch shape ``batch`` (as GPyTorch would use it)."""
    s = layer.variational_strategy
    if s.training or not bool(s.updated_strategy.item()) or not bool(s.variational_params_initialized.item()):
        return False
    if not _is_in_cache_ignore_args(s, "cholesky_factor"):
        return False
    m = s.inducing_points.size(-2)
    batch = torch.broadcast_shapes(s.inducing_points.shape[:-2], torch.Size(batch))
    return _get_from_cache_ignore_args(s, "cholesky_factor").shape == batch + (m, m)


def _layer(layer, x: torch.Tensor):
    """``(mean, interpolation term, strategy, variational distribution, full covariance, m)`` of ``layer`` at
    inputs ``x`` (batched as the strategy needs), as GPyTorch's eval-mode forward computes them (``_ready``)."""
    s = layer.variational_strategy
    z = s.inducing_points
    if z.shape[:-2] != x.shape[:-2]:
        x, z = s._expand_inputs(x, z)
    q = s.variational_distribution
    full_inputs = torch.cat([z, x], dim=-2)
    full_output = layer.forward(full_inputs)
    full_covar = full_output.lazy_covariance_matrix
    m = z.size(-2)
    chol = _get_from_cache_ignore_args(s, "cholesky_factor")
    test_mean = full_output.mean[..., m:]
    induc_data = full_covar[..., :m, m:].to_dense()
    interp = chol.solve(induc_data.type(chol.dtype)).type(induc_data.dtype)
    mean = test_mean + (interp.mT @ q.mean.unsqueeze(-1)).squeeze(-1)
    return mean, interp, s, q, full_covar, m


def _variance(parts) -> torch.Tensor:
    """The diagonal of the layer's predictive covariance, clamped as ``MultivariateNormal.variance``."""
    _, interp, s, q, full_covar, m = parts
    middle = SumLinearOperator(q.lazy_covariance_matrix, s.prior_distribution.lazy_covariance_matrix.mul(-1))
    right = middle @ interp
    data = full_covar[..., m:, m:].add_jitter(s.jitter_val)
    var = 0 + data._diagonal().contiguous()  # SumLinearOperator._diagonal: sum() from 0, in order
    var = var + (interp.mT * right.mT).sum(-1).contiguous()
    low = settings.min_variance.value(var.dtype)
    if var.lt(low).any():
        var = var.clamp_min(low)
    return var


def mean_of(model, x: torch.Tensor, samples: int) -> torch.Tensor | None:
    """The output layer's predictive mean at ``x`` (n, d), shape (samples, n), as ``model(x).mean`` with
    ``samples`` likelihood samples gives it (the same random draws); None where this path does not apply."""
    h = model.hidden.output_dims
    if model.output.output_dims is not None or not (_ready(model.hidden, (h,)) and _ready(model.output, (int(samples),))):
        return None  # checked before any draw: GPyTorch's path then draws from the same generator state
    hidden = _layer(model.hidden, x.unsqueeze(-3).expand(h, *x.shape))
    var = _variance(hidden)
    shape = (int(samples), x.shape[-2], h)
    loc, scale = hidden[0].mT.expand(shape), var.mT.expand(shape).sqrt()
    draws = torch.distributions.Normal(loc=loc, scale=scale).rsample()
    return _layer(model.output, draws)[0]
