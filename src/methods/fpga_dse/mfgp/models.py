"""Surrogate models: correlated multi-objective GP (ICM), independent GPs, deep kernel.

Shapes: inputs X are [n, d] float64 (min-max encoded directives, plus lower-fidelity predictions when
chained); outputs Y are [n, M] (M objectives, normalized units, minimized). Every model standardizes
Y per objective internally and reports predictions in the units it was given.

* :class:`ICMGP` — [Sun-PhD] Eq. 3.14: Cov(f^i(x), f^j(x')) = B_ij k(x, x') with B = W W^T + diag(v)
  (GPyTorch ``MultitaskKernel``, rank M) and k an ARD Matérn-5/2 kernel, optionally on deep features
  phi_W(x) (eq. 3.17). Hyperparameters (and W) by exact marginal likelihood (eqs. 3.8, 3.19).
* :class:`IndependentGP` — one GP per objective (batch of M), ARD Matérn-5/2; optionally with the
  AR1 mean rho_j * f_{i-1,j}(x) + c_j of the linear multi-fidelity model (fpl18).
* chaining the fidelities: :mod:`tunebench.methods.fpga_dse.mfgp.chain`.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import gpytorch
import torch
from gpytorch.constraints import GreaterThan
from gpytorch.distributions import MultitaskMultivariateNormal, MultivariateNormal
from gpytorch.kernels import MaternKernel, MultitaskKernel, ScaleKernel
from gpytorch.likelihoods import GaussianLikelihood, MultitaskGaussianLikelihood
from gpytorch.means import ConstantMean, Mean, MultitaskMean
from gpytorch.priors import LogNormalPrior
from linear_operator.utils.errors import NotPSDError

DTYPE = torch.float64


def lengthscale_prior(d: int) -> LogNormalPrior:
    """Dimension-scaled log-normal lengthscale prior LogNormal(sqrt2 + log(d)/2, sqrt3) (BoTorch's default,
    Hvarfner et al. 2024); keeps ARD fits sane on 8-60 points."""
    return LogNormalPrior(math.sqrt(2) + math.log(max(d, 1)) / 2, math.sqrt(3))


NO_BATCH = torch.Size()  # a single (unbatched) model


def matern_ard(dims: list[int], batch_shape=NO_BATCH) -> MaternKernel:
    """ARD Matérn-5/2 kernel ([Sun-PhD] Eq. 3.16) on the input columns ``dims``."""
    return MaternKernel(nu=2.5, ard_num_dims=len(dims), active_dims=tuple(dims), batch_shape=batch_shape,
                        lengthscale_prior=lengthscale_prior(len(dims)))


def data_kernel(d_x: int, d_f: int, batch_shape=NO_BATCH):
    """Input kernel over [x (d_x columns), f (d_f lower-fidelity columns)].

    d_f == 0: ARD Matérn-5/2 on x. d_f > 0 ([NARGP], [Sun-PhD] Eq. 3.9): k_x(x,x') k_f(f,f') + s k_e(x,x'), the
    product modelling z(f_i(x), x) and the scaled sum the error GP f_e(x).
    """
    xs = list(range(d_x))
    if d_f == 0:
        return matern_ard(xs, batch_shape)
    fs = list(range(d_x, d_x + d_f))
    return matern_ard(xs, batch_shape) * matern_ard(fs, batch_shape) + ScaleKernel(
        matern_ard(xs, batch_shape), batch_shape=batch_shape)


def deep_features(d_in: int, widths=(1000, 500, 50, 6)) -> torch.nn.Sequential:
    """The deep kernel's network phi_W ([Sun-PhD] §3.6.3): fully connected layers with output sizes
    ``widths``, a ReLU after every layer but the last. Output [n, widths[-1]]."""
    layers, prev = [], d_in
    for i, w in enumerate(widths):
        layers.append(torch.nn.Linear(prev, w))
        if i < len(widths) - 1:
            layers.append(torch.nn.ReLU())
        prev = w
    return torch.nn.Sequential(*layers).to(DTYPE)


@dataclass
class FitSettings:
    """How a model's marginal likelihood is maximized.

    optimizer: ``lbfgs`` (full-batch L-BFGS, strong Wolfe) or ``adam``; steps: iterations of a first
    fit; refit_steps: iterations when warm-started from the previous fit; lr: Adam's step size.
    """

    optimizer: str = "lbfgs"
    steps: int = 100
    refit_steps: int = 50
    lr: float = 0.01
    weight_decay: float = 0.0


def maximize_mll(model, likelihood, X, Y, settings: FitSettings, steps: int) -> float:
    """Maximize the exact marginal log likelihood (plus priors) of ``model``; returns the final MLL.

    On a numerical failure (non-PD kernel) the parameters of before the failing step are kept.
    """
    mll = gpytorch.mlls.ExactMarginalLogLikelihood(likelihood, model)
    model.train()
    likelihood.train()
    params = [p for p in mll.parameters() if p.requires_grad]

    def loss_fn():
        out = model(X)
        return -mll(out, Y).sum()

    snapshot = {k: v.clone() for k, v in mll.state_dict().items()}
    value = math.nan
    with warnings.catch_warnings(), gpytorch.settings.cholesky_max_tries(6):
        warnings.simplefilter("ignore")
        try:
            if settings.optimizer == "lbfgs":
                opt = torch.optim.LBFGS(params, lr=1.0, max_iter=steps, line_search_fn="strong_wolfe")

                def closure():
                    opt.zero_grad()
                    loss = loss_fn()
                    loss.backward()
                    return loss
                opt.step(closure)
            elif settings.optimizer == "adam":
                opt = torch.optim.Adam(params, lr=settings.lr, weight_decay=settings.weight_decay, foreach=True)
                for _ in range(steps):
                    opt.zero_grad()
                    loss = loss_fn()
                    loss.backward()
                    opt.step()
            else:
                raise ValueError(f"unknown optimizer {settings.optimizer!r}")
            with torch.no_grad():
                value = -float(loss_fn())
            if not math.isfinite(value):
                raise NotPSDError("non-finite marginal likelihood")
        except (NotPSDError, RuntimeError, ValueError) as e:
            if isinstance(e, ValueError) and "unknown optimizer" in str(e):
                raise
            mll.load_state_dict(snapshot)
    model.eval()
    likelihood.eval()
    return value


def _fit_data(gp, X, Y, steps: int | None) -> float:
    """Give ``gp`` (ICMGP or IndependentGP) its training data -- build the model on the first call,
    warm-start later -- and maximize the marginal likelihood for ``steps`` (None: the fit settings'
    ``steps`` for a new model, ``refit_steps`` after). Returns the MLL (NaN when no step is taken)."""
    fresh = gp.model is None
    if fresh:
        gp._build(X, Y)
    else:
        gp.model.set_train_data(X, Y, strict=False)
    s = gp.fit_settings
    steps = (s.steps if fresh else s.refit_steps) if steps is None else steps
    return maximize_mll(gp.model, gp.likelihood, X, Y, s, steps) if steps else math.nan


class _Standardizer:
    """Per-objective standardization of Y [n, M] (an outcome transform; predictions map back)."""

    def __init__(self, Y: torch.Tensor):
        self.mean = Y.mean(dim=0)
        std = Y.std(dim=0) if Y.shape[0] > 1 else torch.ones_like(self.mean)
        self.std = torch.where(std > 1e-9, std, torch.ones_like(std))

    def forward(self, Y):
        return (Y - self.mean) / self.std


class _ICMExact(gpytorch.models.ExactGP):
    def __init__(self, X, Y, likelihood, kernel, M, rank, features):
        super().__init__(X, Y, likelihood)
        self.mean_module = MultitaskMean(ConstantMean(), num_tasks=M)
        self.covar_module = MultitaskKernel(kernel, num_tasks=M, rank=rank)
        self.features = features

    def forward(self, x):
        z = self.features(x) if self.features is not None else x
        return MultitaskMultivariateNormal(self.mean_module(x), self.covar_module(z))


class ICMGP:
    """Correlated multi-objective GP (intrinsic coregionalization), optionally with a deep kernel.

    Args:
        d_x: directive feature columns; d_f: lower-fidelity columns appended after them (NARGP).
        M: objectives. rank: rank of W in B = W W^T + diag(v) (None: M, a full task covariance).
        deep: None, or the widths of phi_W (e.g. (1000, 500, 50, 6)); the Matérn kernel then acts
            on the last width's features of the whole input.
    """

    def __init__(self, d_x: int, d_f: int, M: int, rank: int | None = None, deep=None,
                 fit: FitSettings | None = None):
        self.d_x, self.d_f, self.M = d_x, d_f, M
        self.rank = rank or M
        self.deep = tuple(deep) if deep else None
        self.fit_settings = fit or FitSettings()
        self.model = None

    def _build(self, X, Y):
        if self.deep:
            features = deep_features(self.d_x + self.d_f, self.deep)
            kernel = matern_ard(list(range(self.deep[-1])))
        else:
            features, kernel = None, data_kernel(self.d_x, self.d_f)
        likelihood = MultitaskGaussianLikelihood(num_tasks=self.M, rank=0, has_global_noise=False,
                                                 noise_constraint=GreaterThan(1e-6))
        self.model = _ICMExact(X, Y, likelihood, kernel, self.M, self.rank, features).to(DTYPE)
        self.likelihood = self.model.likelihood

    def set_data(self, X, Y) -> None:
        """New training data, the hyperparameters kept (no optimization)."""
        self.fit(X, Y, steps=0)

    def fit(self, X, Y, steps: int | None = None) -> float:
        """Fit on X [n, d_x + d_f], Y [n, M]; warm-starts from the previous fit. Returns the MLL."""
        X, Y = torch.as_tensor(X, dtype=DTYPE), torch.as_tensor(Y, dtype=DTYPE)
        self.scaler = _Standardizer(Y)
        Ys = self.scaler.forward(Y)
        return _fit_data(self, X, Ys, steps)

    @torch.no_grad()
    def predict(self, X, chunk: int = 256) -> tuple[torch.Tensor, torch.Tensor]:
        """Latent posterior at X [N, d]: mean [N, M] and per-candidate covariance [N, M, M]."""
        X = torch.as_tensor(X, dtype=DTYPE)
        means, covs = [], []
        with gpytorch.settings.fast_pred_var(False):
            for s in range(0, X.shape[0], chunk):
                post = self.model(X[s:s + chunk])
                n = post.mean.shape[0]
                full = post.covariance_matrix.view(n, self.M, n, self.M)  # interleaved: row = point * M + task
                idx = torch.arange(n)
                covs.append(full[idx, :, idx, :])
                means.append(post.mean)
        mean = torch.cat(means) * self.scaler.std + self.scaler.mean
        cov = torch.cat(covs) * (self.scaler.std[:, None] * self.scaler.std[None, :])
        return mean, cov

    def task_covariance(self) -> torch.Tensor:
        """The learned objective covariance B [M, M] (standardized units)."""
        return self.model.covar_module.task_covar_module.covar_matrix.to_dense().detach()


class _AR1Mean(Mean):
    """Batch mean rho_j * x[..., -1] + c_j: the AR1 link to the lower fidelity's prediction (last column)."""

    def __init__(self, batch_shape):
        super().__init__()
        self.register_parameter("rho", torch.nn.Parameter(torch.ones(*batch_shape, 1)))
        self.register_parameter("constant", torch.nn.Parameter(torch.zeros(*batch_shape, 1)))

    def forward(self, x):
        return self.rho * x[..., -1] + self.constant


class _IndependentExact(gpytorch.models.ExactGP):
    def __init__(self, X, Y, likelihood, kernel, mean):
        super().__init__(X, Y, likelihood)
        self.mean_module = mean
        self.covar_module = kernel

    def forward(self, x):
        return MultivariateNormal(self.mean_module(x), self.covar_module(x))


class IndependentGP:
    """M independent GPs (a batch), ARD Matérn-5/2 with an output scale each.

    Args:
        link: ``none`` — input [x (d_x), f (d_f)] with the NARGP kernel when d_f > 0;
            ``ar1`` — input per objective [x, f_j] and mean rho_j f_j + c_j, kernel on x only (d_f
            must be M then; the AR1 variance term is added by :class:`FidelityChain`).
    """

    def __init__(self, d_x: int, d_f: int, M: int, link: str = "none", fit: FitSettings | None = None):
        if link not in ("none", "ar1"):
            raise ValueError(f"link must be none or ar1, got {link!r}")
        self.d_x, self.d_f, self.M, self.link = d_x, d_f, M, link
        self.fit_settings = fit or FitSettings()
        self.model = None

    def _inputs(self, X):
        """[M, n, d] batch inputs: the same X for every objective, or [x, f_j] for the AR1 link."""
        X = torch.as_tensor(X, dtype=DTYPE)
        if self.link == "ar1" and self.d_f:
            x, f = X[:, :self.d_x], X[:, self.d_x:]
            return torch.stack([torch.cat([x, f[:, j:j + 1]], dim=1) for j in range(self.M)])
        return X.expand(self.M, *X.shape)

    def _build(self, Xb, Yb):
        batch = torch.Size([self.M])
        if self.link == "ar1" and self.d_f:
            kernel = ScaleKernel(matern_ard(list(range(self.d_x)), batch), batch_shape=batch)
            mean = _AR1Mean(batch)
        else:
            kernel = ScaleKernel(data_kernel(self.d_x, self.d_f, batch), batch_shape=batch)
            mean = ConstantMean(batch_shape=batch)
        likelihood = GaussianLikelihood(batch_shape=batch, noise_constraint=GreaterThan(1e-6))
        self.model = _IndependentExact(Xb, Yb, likelihood, kernel, mean).to(DTYPE)
        self.likelihood = self.model.likelihood

    def set_data(self, X, Y) -> None:
        """New training data, the hyperparameters kept (no optimization)."""
        self.fit(X, Y, steps=0)

    def fit(self, X, Y, steps: int | None = None) -> float:
        """Fit on X [n, d_x + d_f], Y [n, M]; warm-starts from the previous fit. Returns the MLL."""
        Y = torch.as_tensor(Y, dtype=DTYPE)
        self.scaler = _Standardizer(Y)
        Xb, Yb = self._inputs(X), self.scaler.forward(Y).T.contiguous()
        if self.link == "ar1" and self.d_f:  # the lower prediction enters the mean in standardized units
            Xb = Xb.clone()
            Xb[..., -1] = (Xb[..., -1] - self.scaler.mean[:, None]) / self.scaler.std[:, None]
        return _fit_data(self, Xb, Yb, steps)

    def _test_inputs(self, X):
        Xb = self._inputs(X)
        if self.link == "ar1" and self.d_f:
            Xb = Xb.clone()
            Xb[..., -1] = (Xb[..., -1] - self.scaler.mean[:, None]) / self.scaler.std[:, None]
        return Xb

    @torch.no_grad()
    def predict(self, X) -> tuple[torch.Tensor, torch.Tensor]:
        """Latent mean [N, M] and diagonal covariance [N, M, M]."""
        post = self.model(self._test_inputs(X))
        mean = post.mean.T * self.scaler.std + self.scaler.mean
        var = post.variance.T * self.scaler.std ** 2
        return mean, torch.diag_embed(var)

    @torch.no_grad()
    def predict_joint(self, X) -> tuple[torch.Tensor, torch.Tensor]:
        """Latent mean [N, M] and each objective's joint covariance over the candidates [M, N, N]."""
        post = self.model(self._test_inputs(X))
        mean = post.mean.T * self.scaler.std + self.scaler.mean
        return mean, post.covariance_matrix * (self.scaler.std ** 2)[:, None, None]

    def rho(self) -> torch.Tensor:
        """AR1 scale rho_j [M] in the units of Y (1 where there is no AR1 link)."""
        if self.link != "ar1" or not self.d_f:
            return torch.ones(self.M, dtype=DTYPE)
        return self.model.mean_module.rho.detach().view(-1)
