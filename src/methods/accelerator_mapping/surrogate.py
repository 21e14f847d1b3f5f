"""The GP surrogate of ``mapspace_bo`` (BoTorch): fitted to standardized log objectives, scored with log
expected improvement ([Ament-NeurIPS23], BoTorch's ``LogExpectedImprovement``) for minimization."""

from __future__ import annotations

import warnings
from contextlib import contextmanager

import numpy as np
import torch

from tunebench.methods.torch_threads import one_thread

DTYPE = torch.float64


def fit_gp(X: np.ndarray, y: np.ndarray, cat_dims: list[int], maxiter: int = 100):
    """A GP fitted by maximum marginal likelihood to ``y`` (minimized) at ``X``; categorical columns
    (``cat_dims``) get BoTorch's mixed kernel. BoTorch's defaults: Matern 5/2 ARD with dimension-scaled
    priors, outcome standardization; L-BFGS-B for at most ``maxiter`` iterations."""
    from botorch.models import MixedSingleTaskGP, SingleTaskGP
    from botorch.models.transforms.outcome import Standardize

    train_x = torch.as_tensor(X, dtype=DTYPE)
    train_y = torch.as_tensor(-y, dtype=DTYPE).unsqueeze(-1)  # BoTorch maximizes
    if cat_dims and len(cat_dims) < X.shape[1]:
        model = MixedSingleTaskGP(train_x, train_y, cat_dims=cat_dims, outcome_transform=Standardize(m=1))
    else:
        model = SingleTaskGP(train_x, train_y, outcome_transform=Standardize(m=1))
    return _fitted(model, maxiter)


def _fitted(model, maxiter: int):
    """``model`` with its hyperparameters fitted by maximum marginal likelihood (L-BFGS, ``maxiter``
    iterations), in eval mode; an optimizer failure leaves the prior's hyperparameters."""
    from botorch.fit import fit_gpytorch_mll
    from gpytorch.mlls import ExactMarginalLogLikelihood

    mll = ExactMarginalLogLikelihood(model.likelihood, model)
    with warnings.catch_warnings(), one_thread():
        warnings.simplefilter("ignore")
        try:
            fit_gpytorch_mll(mll, optimizer_kwargs={"options": {"maxiter": maxiter}})
        except Exception:  # the optimizer's failure leaves the prior's hyperparameters
            pass
    model.eval()
    return model


def fit_multitask_gp(X: np.ndarray, y: np.ndarray, tasks: np.ndarray, target_task: int, maxiter: int = 100):
    """A multi-task GP ([Dinh-MLArchSys23] §III-B; BoTorch's ``MultiTaskGP``, an ICM kernel: a Matern
    kernel over the inputs times a learned task covariance) on observations of several hardware
    configurations (``tasks``: one index per row), predicting ``target_task``; fitted as :func:`fit_gp`."""
    from botorch.models import MultiTaskGP

    train_x = torch.as_tensor(np.column_stack([X, tasks]), dtype=DTYPE)
    train_y = torch.as_tensor(-y, dtype=DTYPE).unsqueeze(-1)
    model = MultiTaskGP(train_x, train_y, task_feature=-1, output_tasks=[int(target_task)])
    return _fitted(model, maxiter)


def score_candidates(model, X: np.ndarray, best_y: float, xi: float = 0.0) -> np.ndarray:
    """Log expected improvement of each candidate row of ``X`` over the best (lowest) ``best_y``."""
    from botorch.acquisition import LogExpectedImprovement

    acq = LogExpectedImprovement(model, best_f=-best_y + xi)  # improvement by at least xi (log units)
    out = []
    with torch.no_grad(), one_thread(), _measured_points_quiet():
        for chunk in torch.as_tensor(X, dtype=DTYPE).split(1024):
            out.append(acq(chunk.unsqueeze(1)).numpy())
    return np.concatenate(out)


@contextmanager
def _measured_points_quiet():
    """GPyTorch's warning of a (rounding-) negative posterior variance, silenced: with ``gp_features=mapping`` a
    candidate that decodes to a measured mapping sits on a training point, where the variance is 0 (its
    expected improvement is then ~0, as it should be)."""
    from gpytorch.utils.warnings import NumericalWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NumericalWarning)
        yield


def posterior_mean(model, X: np.ndarray) -> np.ndarray:
    """The surrogate's mean of the (log) objective at the rows of ``X``."""
    out = []
    with torch.no_grad(), one_thread():
        for chunk in torch.as_tensor(X, dtype=DTYPE).split(4096):
            out.append(-model.posterior(chunk).mean.squeeze(-1).numpy())
    return np.concatenate(out)
