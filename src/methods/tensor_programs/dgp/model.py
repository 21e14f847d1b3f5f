"""The deep Gaussian process of dgp ([Sun-ICCV21] §3.2–3.4; docs/METHODS.md §dgp steps 3 and 5), on GPyTorch.

Model: two GP layers (``gpytorch.models.deep_gps.DeepGPLayer``). The hidden layer maps the
d-dimensional config features to ``hidden_dims`` outputs (linear mean, as in GPyTorch's deep GP
example, so the composition starts near a linear warping); the output layer maps those to one value
(constant mean). Both use a scaled RBF kernel with ARD ([Sun-ICCV21] §4.1: "radial basis function") and
``num_inducing`` variational inducing points ([Sun-ICCV21] §4.1: 128); the hidden layer's inducing points
start at distinct training configs (``z¹ ⊂ X``, [Sun-ICCV21] §3.3), the output layer's at N(0, 1) draws.
Gaussian likelihood.

Training (:meth:`DeepGP.fit`): doubly-stochastic variational inference ([DSVI])
= Adam on minibatches of the ELBO (``DeepApproximateMLL(VariationalELBO)``) with Monte-Carlo
samples propagated through the layers (the ELBO computed by
:mod:`~tunebench.methods.tensor_programs.dgp.lean_elbo`, GPyTorch's where that does not apply). Transfer (:meth:`DeepGP.fit_map`): maximize
``ELBO(tuning set)/N − λ‖θ − θ̃‖²`` from the pre-trained parameters θ̃ ([Sun-ICCV21] Eq. 6), θ = every
trainable tensor (kernel, mean and likelihood hyperparameters in GPyTorch's raw, unconstrained
parametrization; inducing locations; variational parameters). We divide the ELBO by N (GPyTorch's
convention) so that λ means the same for any tuning-set size.

Targets are standardized with the pre-training data's mean and standard deviation and keep that
scaling during the transfer, so a new layer's larger throughputs show as larger standardized values.
"""

from __future__ import annotations

import contextlib
import copy
import logging
import time

import gpytorch
import numpy as np
import torch
from gpytorch.mlls import DeepApproximateMLL, VariationalELBO
from gpytorch.models.deep_gps import DeepGPLayer
from linear_operator.operators import MatmulLinearOperator, SumLinearOperator

from tunebench.methods.torch_threads import one_thread

log = logging.getLogger(__name__)


class _L2Pull:
    """``λ‖θ − θ̃‖²`` of the MAP transfer: a tensor for the loss, a float for the kept-best objective."""

    def __init__(self, params: list, anchor: list | None, l2: float):
        self.params, self.anchor, self.l2 = params, anchor, l2
        self.active = anchor is not None and l2 > 0

    def __call__(self) -> torch.Tensor:
        return self.l2 * sum(((p - a) ** 2).sum() for p, a in zip(self.params, self.anchor))

    def value(self) -> float:
        return self.l2 * sum(float(((p - a) ** 2).sum()) for p, a in zip(self.params, self.anchor))


def _snapshot(model) -> dict:
    """A copy of ``model``'s state dict (its tensors cloned: the same values as a deep copy)."""
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


class _Objective:
    """The ELBO per data point of a minibatch of a training set of ``num_data`` rows, with the current
    ``num_likelihood_samples``: :func:`~tunebench.methods.tensor_programs.dgp.lean_elbo.elbo` when ``lean``
    and it applies, else GPyTorch's ``DeepApproximateMLL(VariationalELBO)`` on ``model(x)`` (in eval mode
    when ``training`` is False; the model is left in train mode)."""

    def __init__(self, model, num_data: int, lean: bool):
        self.model, self.num_data, self.lean = model, num_data, lean
        self.mll = model._mll(num_data)

    def __call__(self, x: torch.Tensor, y: torch.Tensor, training: bool) -> torch.Tensor:
        from tunebench.methods.tensor_programs.dgp.lean_elbo import elbo

        samples = gpytorch.settings.num_likelihood_samples.value()
        value = elbo(self.model, x, y, self.num_data, samples, training) if self.lean else None
        if value is not None:
            return value
        if training:
            return self.mll(self.model(x), y)
        self.model.eval()
        try:
            return self.mll(self.model(x), y)
        finally:
            self.model.train()


class _Strategy(gpytorch.variational.VariationalStrategy):
    """GPyTorch's whitened variational strategy that, while ``mean_only`` is set (in eval mode), leaves the
    predictive covariance lazy: ``K_XZ K_ZZ^{-1/2} (S - I) K_ZZ^{-1/2} K_ZX`` as a product of operators, not
    the dense ``(S - I) K_ZZ^{-1/2} K_ZX`` that GPyTorch computes for every prediction. The predictive mean
    is computed by GPyTorch's own lines, so it is the same to the bit; the covariance, if read, is the same
    matrix (evaluated later, not bit for bit). Its parameters and buffers are GPyTorch's (the same state dict)."""

    mean_only = False

    def _compute_predictive_updates(self, chol, induc_data_covar, inducing_values, variational_inducing_covar,
                                    prior_covar, diag=True):
        if not self.mean_only or self.training:
            return super()._compute_predictive_updates(chol, induc_data_covar, inducing_values,
                                                       variational_inducing_covar, prior_covar, diag)
        interp_term = chol.solve(induc_data_covar.type(chol.dtype))  # as VariationalStrategy's eval branch
        interp_term = interp_term.type(induc_data_covar.dtype)
        mean_update = (interp_term.mT @ inducing_values.unsqueeze(-1)).squeeze(-1)
        middle_term = prior_covar.mul(-1)
        if variational_inducing_covar is not None:
            middle_term = SumLinearOperator(variational_inducing_covar, middle_term)
        return mean_update, MatmulLinearOperator(interp_term.mT, MatmulLinearOperator(middle_term, interp_term))


@contextlib.contextmanager
def mean_only(layer: DeepGPLayer):
    """Inside, ``layer`` (in eval mode) computes its predictive mean without the dense covariance update."""
    layer.variational_strategy.mean_only = True
    try:
        yield
    finally:
        layer.variational_strategy.mean_only = False


class GPLayer(DeepGPLayer):
    """One GP layer: ``input_dims`` -> ``output_dims`` (None: a single output); ``inducing`` of shape
    (output_dims, m, input_dims), or (m, input_dims) for a single output."""

    def __init__(self, input_dims: int, output_dims: int | None, inducing: torch.Tensor, linear_mean: bool):
        batch = torch.Size([]) if output_dims is None else torch.Size([output_dims])
        dist = gpytorch.variational.CholeskyVariationalDistribution(inducing.shape[-2], batch_shape=batch)
        strategy = _Strategy(self, inducing, dist, learn_inducing_locations=True)
        super().__init__(strategy, input_dims, output_dims)
        self.mean_module = (gpytorch.means.LinearMean(input_dims, batch_shape=batch) if linear_mean
                            else gpytorch.means.ConstantMean(batch_shape=batch))
        self.covar_module = gpytorch.kernels.ScaleKernel(
            gpytorch.kernels.RBFKernel(batch_shape=batch, ard_num_dims=input_dims), batch_shape=batch)

    def forward(self, x):
        return gpytorch.distributions.MultivariateNormal(self.mean_module(x), self.covar_module(x))


class DeepGP(gpytorch.models.deep_gps.DeepGP):
    """A two-layer deep GP regressor over config features.

    Args:
        x_init: float array (n, d) of training features; the hidden layer's inducing points are
            ``min(num_inducing, n)`` distinct rows of it (random, by ``seed``).
        hidden_dims: width of the hidden GP layer.
        num_inducing: inducing points per GP (per output of the hidden layer).
        seed: seeds the inducing-point choice, the initial draws and the training's sampling.
    """

    def __init__(self, x_init: np.ndarray, hidden_dims: int = 4, num_inducing: int = 128, seed: int = 0):
        super().__init__()
        x = torch.as_tensor(np.asarray(x_init), dtype=torch.float32)
        n, d = x.shape
        gen = torch.Generator().manual_seed(int(seed))
        uniq = torch.unique(x, dim=0)
        m = min(num_inducing, len(uniq))
        z = uniq[torch.randperm(len(uniq), generator=gen)[:m]]
        self.hidden = GPLayer(d, hidden_dims, z.unsqueeze(0).repeat(hidden_dims, 1, 1).clone(), linear_mean=True)
        self.output = GPLayer(hidden_dims, None, torch.randn(m, hidden_dims, generator=gen), linear_mean=False)
        self.likelihood = gpytorch.likelihoods.GaussianLikelihood()
        self.seed = int(seed)
        self.y_mean, self.y_std = 0.0, 1.0
        self.n_features = d
        self.last_fit: dict = {}

    def forward(self, x: torch.Tensor):
        return self.output(self.hidden(x))

    # ---- objectives ------------------------------------------------------------------------
    def _mll(self, num_data: int):
        return DeepApproximateMLL(VariationalELBO(self.likelihood, self, num_data))

    def standardize(self, y: np.ndarray) -> torch.Tensor:
        return torch.as_tensor((np.asarray(y, dtype=np.float64) - self.y_mean) / self.y_std, dtype=torch.float32)

    @one_thread()
    def elbo(self, x: np.ndarray, y: np.ndarray, samples: int = 32, seed: int = 0) -> float:
        """ELBO per data point of (x, y) (y in the original units), averaged over ``samples`` draws."""
        xt = torch.as_tensor(np.asarray(x), dtype=torch.float32)
        yt = self.standardize(y)
        mll = self._mll(len(yt))
        state = torch.random.get_rng_state()
        torch.manual_seed(seed)
        try:
            with torch.no_grad(), gpytorch.settings.num_likelihood_samples(samples):
                return float(mll(self(xt), yt))
        finally:
            torch.random.set_rng_state(state)

    # ---- training --------------------------------------------------------------------------
    @one_thread()
    def fit(self, x: np.ndarray, y: np.ndarray, epochs: int = 100, lr: float = 0.01, batch_size: int = 256,
            train_samples: int = 8, prior: dict | None = None, l2: float = 0.0, lean: bool = True) -> DeepGP:
        """Maximize the ELBO of (x, y) (minus ``l2 × ‖θ − prior‖²`` when ``prior`` is given).

        With a ``prior`` (MAP transfer) the objective is also evaluated on all of (x, y) with fixed
        Monte-Carlo draws after every epoch, starting at θ̃, and the best parameters are kept: Adam's
        steps of about ``lr`` per parameter would otherwise leave θ jittering around the optimum,
        which for a large λ is farther from θ̃ than the MAP solution.

        Args:
            x: float (n, d) features; y: float (n,) targets in the original units (GFLOPS).
            epochs: passes over the data; lr: Adam's step size; batch_size: minibatch rows.
            train_samples: Monte-Carlo samples through the layers per step (doubly stochastic).
            prior: a ``state_dict`` θ̃ to pull towards (MAP transfer); l2: λ.
            lean: the ELBO in plain PyTorch (:mod:`~tunebench.methods.tensor_programs.dgp.lean_elbo`: the same
                quantity and draws, float rounding apart); False: through GPyTorch's modules.

        Without ``prior`` the targets' mean/std become the model's standardization.
        """
        tic = time.perf_counter()
        y = np.asarray(y, dtype=np.float64)
        if prior is None:
            self.y_mean = float(y.mean())
            self.y_std = float(y.std()) or 1.0
        xt = torch.as_tensor(np.asarray(x), dtype=torch.float32)
        yt = self.standardize(y)
        n = len(yt)
        params = [p for p in self.parameters() if p.requires_grad]
        names = [k for k, p in self.named_parameters() if p.requires_grad]
        anchor = [prior[k].detach().clone() for k in names] if prior is not None else None
        opt = torch.optim.Adam(params, lr=lr)
        mll = _Objective(self, n, lean)
        gen = torch.Generator().manual_seed(self.seed + 1)
        torch.manual_seed(self.seed + 2)
        bs = max(1, min(int(batch_size), n))
        penalty = _L2Pull(params, anchor, l2)
        losses = []
        best = None
        with gpytorch.settings.num_likelihood_samples(int(train_samples)):
            if anchor is not None:  # MAP: θ̃ itself is the first candidate, so the result is never worse
                best = (self._map_objective(mll, xt, yt, penalty), _snapshot(self))
            self.train()
            for _ in range(int(epochs)):
                losses.append(self._epoch(opt, mll, xt, yt, torch.randperm(n, generator=gen), bs, penalty))
                if best is not None:
                    obj = self._map_objective(mll, xt, yt, penalty)
                    if obj > best[0]:
                        best = (obj, _snapshot(self))
        if best is not None:
            self.load_state_dict(best[1])
        self.eval()
        self.last_fit = {"n": n, "epochs": int(epochs), "loss_first": losses[0] if losses else None,
                         "loss_last": losses[-1] if losses else None, "seconds": time.perf_counter() - tic}
        return self

    def _epoch(self, opt, mll, xt: torch.Tensor, yt: torch.Tensor, perm: torch.Tensor, bs: int,
               penalty: _L2Pull) -> float:
        """One pass of Adam over minibatches of (xt, yt) in the order ``perm``; the mean loss per row."""
        total = 0.0
        for i in range(0, len(perm), bs):
            idx = perm[i:i + bs]
            opt.zero_grad()
            loss = -mll(xt[idx], yt[idx], training=True)
            if penalty.active:
                loss = loss + penalty()
            loss.backward()
            opt.step()
            total += float(loss.detach()) * len(idx)
        return total / len(perm)

    def _map_objective(self, mll, xt: torch.Tensor, yt: torch.Tensor, penalty: _L2Pull) -> float:
        """ELBO/N − λ‖θ − θ̃‖² on all of (x, y) with fixed draws (MAP only: keeps the best iterate)."""
        state = torch.random.get_rng_state()
        torch.manual_seed(self.seed + 3)
        try:
            with torch.no_grad():
                return float(mll(xt, yt, training=False)) - penalty.value()
        finally:
            torch.random.set_rng_state(state)

    def fit_map(self, x: np.ndarray, y: np.ndarray, l2: float, **kw) -> DeepGP:
        """MAP transfer ([Sun-ICCV21] Eq. 6) from the current parameters θ̃; ``kw`` as in :meth:`fit`."""
        return self.fit(x, y, prior=_snapshot(self), l2=l2, **kw)

    def distance_to(self, state: dict) -> float:
        """‖θ − state‖₂ over the trainable parameters (same parametrization as the L2 pull)."""
        sq = 0.0
        for k, p in self.named_parameters():
            if p.requires_grad:
                sq += float(((p.detach() - state[k]) ** 2).sum())
        return sq ** 0.5

    # ---- prediction ------------------------------------------------------------------------
    @one_thread()
    @torch.no_grad()
    def predict_mean(self, x: np.ndarray, samples: int = 16, seed: int = 0, chunk: int = 4096,
                     lean: bool = True) -> np.ndarray:
        """Predictive mean in the original units (n,), float64: the mean over ``samples`` draws
        propagated through the layers, drawn with a fixed ``seed`` (same x -> same value). ``lean``: the
        same predictive distribution with the inducing-point solves done once per fixed model and without the
        output layer's covariance (:mod:`~tunebench.methods.tensor_programs.dgp.fast_predict`: float rounding
        apart, the same numbers); False: GPyTorch's own path."""
        from tunebench.methods.tensor_programs.dgp.fast_predict import mean_of, prime

        xt = torch.as_tensor(np.asarray(x), dtype=torch.float32)
        out = []
        state = torch.random.get_rng_state()
        quick = mean_only(self.output) if lean else contextlib.nullcontext()
        try:
            with gpytorch.settings.num_likelihood_samples(int(samples)), quick:
                if lean:
                    prime(self, xt, samples)
                # the CPU generator only (torch.manual_seed also seeds CUDA's, at ~1 ms a call here): the same draws
                torch.default_generator.manual_seed(seed)
                for i in range(0, len(xt), chunk):
                    mean = mean_of(self, xt[i:i + chunk], samples) if lean else None
                    out.append((self(xt[i:i + chunk]).mean if mean is None else mean).mean(0))
        finally:
            torch.random.set_rng_state(state)
        mean = torch.cat(out).double().numpy() if out else np.zeros(0)
        return mean * self.y_std + self.y_mean

    def copy(self) -> DeepGP:
        return copy.deepcopy(self)
