"""dgp's predictive mean without GPyTorch's lazy operators and per-call solves (docs/METHODS.md §dgp).

:meth:`DeepGP.predict_mean <tunebench.methods.tensor_programs.dgp.model.DeepGP.predict_mean>` runs for every simulated
annealing step (128 configs, 16 draws) with the model fixed. GPyTorch 1.15's eval-mode
``VariationalStrategy.forward`` computes, per call and layer, the kernel of inducing points and inputs
together, and solves its cached Cholesky factor ``L`` of ``K_ZZ`` against ``K_ZX`` in float64 (in the
output layer once per draw: its factor has the draws' batch shape, 16 copies of one matrix), to get
mean = prior mean + ``K_XZ L⁻ᵀ m`` and covariance = ``K_XX + K_XZ L⁻ᵀ (S − I) L⁻¹ K_ZX`` (whitened: ``m``,
``S`` the variational mean and covariance). :func:`mean_of` takes the same predictive distribution with
the algebra regrouped:

- per fixed model and layer, once (:class:`_Fixed`, float64, from GPyTorch's cached factor):
  ``alpha = L⁻ᵀ m`` and ``middle = L⁻ᵀ (S − I) L⁻¹``; kept while GPyTorch's factor is the same object
  (GPyTorch drops it on ``train()``/``eval()``) and every parameter and buffer of the layer has the same
  storage and version (an optimizer step, ``load_state_dict`` or any in-place change bumps it);
- per call: the cross kernel ``K_XZ`` only; mean = prior mean + ``K_XZ alpha``; the hidden layer's variance
  ``diag(K_XX) + jitter + diag(K_XZ middle K_ZX)``, clamped as ``MultivariateNormal.variance`` clamps,
  once for all draws; the products in float64;
- the draws: ``torch.distributions.Normal(mean, sqrt(variance)).rsample()`` on the draws' shape, as
  ``DeepGPLayer`` takes them (the same random numbers from the same generator state).

Not bit-identical to GPyTorch's path (the float rounding differs: another order of operations, the kernel
of the inputs against the inducing points only); the test (tests/methods/test_dgp_fast_predict.py)
checks it against GPyTorch's path to a tight tolerance, and after parameter changes. Where a precondition
does not hold (a strategy not yet whitened, no cached Cholesky factor of the right batch shape),
:func:`mean_of` returns None, before it draws, and the caller takes GPyTorch's path. :func:`prime` has
GPyTorch compute the factors first (a forward of one row, its draws discarded), so that a fixed model's
first call takes the lean path as well.
"""

from __future__ import annotations

import weakref

import torch
from gpytorch import settings
from gpytorch.utils.memoize import _get_from_cache_ignore_args, _is_in_cache_ignore_args

from tunebench.methods.tensor_programs.dgp.lean_elbo import hidden_draws, strategy_ready

_FIXED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # strategy -> _Fixed, dropped with it


class _Fixed:
    """What a layer's predictions need of its inducing distribution, for fixed parameters (float64):
    ``alpha = L⁻ᵀ m`` and ``middle = L⁻ᵀ (S − I) L⁻¹`` of the Cholesky factor ``chol`` (kept: its identity is
    part of the key) and the variational mean and covariance ``m``, ``S`` (whitened)."""

    def __init__(self, layer, chol, key: tuple, variance: bool):
        s = layer.variational_strategy
        low = chol.to_dense()
        eye = torch.eye(low.size(-1), dtype=low.dtype).expand(low.shape)
        inv = torch.linalg.solve_triangular(low, eye, upper=False)  # L⁻¹
        q = s.variational_distribution
        self.chol, self.key = chol, key
        self.alpha = inv.mT @ q.mean.type(low.dtype).unsqueeze(-1)
        self.middle = None
        if variance:
            middle = q.covariance_matrix.type(low.dtype) - s.prior_distribution.covariance_matrix.type(low.dtype)
            self.middle = inv.mT @ middle @ inv


def _key(layer) -> tuple:
    """The storage and version of every parameter and buffer of ``layer``: any in-place update (an optimizer
    step, ``load_state_dict``, ``copy_``) or replaced tensor changes it."""
    return tuple((t.data_ptr(), t._version) for t in (*layer.parameters(), *layer.buffers()))


def _fixed(layer, variance: bool) -> _Fixed:
    """``layer``'s :class:`_Fixed`, computed again when GPyTorch's Cholesky factor or a parameter changed."""
    s = layer.variational_strategy
    chol = _get_from_cache_ignore_args(s, "cholesky_factor")
    key = _key(layer)
    got = _FIXED.get(s)
    if got is None or got.chol is not chol or got.key != key or (variance and got.middle is None):
        got = _FIXED[s] = _Fixed(layer, chol, key, variance)
    return got


def _ready(layer, batch: tuple) -> bool:
    """Whether ``layer``'s strategy is in eval mode, whitened, with its Cholesky factor (lower triangular)
    cached for inputs of batch shape ``batch`` (as GPyTorch would use it)."""
    s = layer.variational_strategy
    if s.training or not strategy_ready(s):
        return False
    if not _is_in_cache_ignore_args(s, "cholesky_factor"):
        return False
    chol = _get_from_cache_ignore_args(s, "cholesky_factor")
    m = s.inducing_points.size(-2)
    batch = torch.broadcast_shapes(s.inducing_points.shape[:-2], torch.Size(batch))
    return chol.shape == batch + (m, m) and not getattr(chol, "upper", False)


def _layer(layer, x: torch.Tensor, variance: bool):
    """``(mean, variance or None)`` of ``layer``'s predictive marginals at inputs ``x`` (batched as the
    strategy needs): prior mean + ``K_XZ alpha``; ``diag(K_XX) + jitter + diag(K_XZ middle K_ZX)``, clamped as
    ``MultivariateNormal.variance`` clamps. The products in float64 (GPyTorch's factor's dtype)."""
    s = layer.variational_strategy
    z = s.inducing_points
    if z.shape[:-2] != x.shape[:-2]:
        x, z = s._expand_inputs(x, z)
    fixed = _fixed(layer, variance)
    cross = layer.covar_module(x, z).to_dense()
    wide = cross.type(fixed.alpha.dtype)
    mean = layer.mean_module(x) + (wide @ fixed.alpha).squeeze(-1).type(cross.dtype)
    if not variance:
        return mean, None
    var = layer.covar_module(x, diag=True) + s.jitter_val
    var = var + ((wide @ fixed.middle) * wide).sum(-1).type(var.dtype)
    low = settings.min_variance.value(var.dtype)
    return mean, var.clamp_min(low)


def prime(model, x: torch.Tensor, samples: int) -> None:
    """Let GPyTorch compute and cache both layers' Cholesky factors (one eval-mode forward of one row of
    ``x``, its draws discarded: the caller seeds the generator afterwards) where that is all :func:`mean_of`
    lacks, so that the first call on a fixed model takes the lean path too. The factors depend on the inducing
    points and kernel only, not on the rows: the same ones GPyTorch's path would compute on all of ``x``."""
    h = model.hidden.output_dims
    layers = ((model.hidden, (h,)), (model.output, (int(samples),)))
    if len(x) == 0 or model.output.output_dims is not None:
        return
    if any(layer.variational_strategy.training or not strategy_ready(layer.variational_strategy)
           for layer, _ in layers):
        return
    if not all(_ready(layer, batch) for layer, batch in layers):
        model(x[:1])


def mean_of(model, x: torch.Tensor, samples: int) -> torch.Tensor | None:
    """The output layer's predictive mean at ``x`` (n, d), shape (samples, n), as ``model(x).mean`` with
    ``samples`` likelihood samples gives it (the same random draws, float rounding apart); None where this
    path does not apply."""
    h = model.hidden.output_dims
    if model.output.output_dims is not None or not (_ready(model.hidden, (h,)) and _ready(model.output, (int(samples),))):
        return None  # checked before any draw: GPyTorch's path then draws from the same generator state
    mean, var = _layer(model.hidden, x.unsqueeze(-3).expand(h, *x.shape), variance=True)
    return _layer(model.output, hidden_draws(mean, var, samples), variance=False)[0]
