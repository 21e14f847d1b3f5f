"""dgp's plain-PyTorch ELBO (methods/tensor_programs/dgp/lean_elbo.py) against GPyTorch's
DeepApproximateMLL(VariationalELBO): value and gradient on random models, to float32 rounding."""
import gpytorch
import numpy as np
import pytest
import torch

from tunebench.methods.tensor_programs.dgp import lean_elbo
from tunebench.methods.tensor_programs.dgp.model import DeepGP


def _model(seed: int, n: int = 150, d: int = 6, hidden: int = 3, inducing: int = 24) -> tuple:
    rng = np.random.default_rng(seed)
    x = rng.random((n, d)).astype(np.float32)
    y = 10 * np.sin(3 * x[:, 0]) + 5 * x[:, 1] ** 2 + 0.1 * rng.normal(size=n)
    m = DeepGP(x, hidden_dims=hidden, num_inducing=inducing, seed=seed).fit(x, y, epochs=2, lr=0.03, batch_size=64)
    with torch.no_grad():  # a random point of parameter space, not just the start
        gen = torch.Generator().manual_seed(seed)
        for p in m.parameters():
            p.add_(0.3 * torch.randn(p.shape, generator=gen))
    return m, torch.as_tensor(x), m.standardize(y)


def _both(m, x, y, num_data, samples, training):
    """(lean value, GPyTorch value, lean grads, GPyTorch grads), each from the same generator state."""
    out = []
    for lean in (True, False):
        m.zero_grad()
        m.train(training)
        torch.manual_seed(11)
        with gpytorch.settings.num_likelihood_samples(samples):
            v = lean_elbo.elbo(m, x, y, num_data, samples, training) if lean else \
                gpytorch.mlls.DeepApproximateMLL(gpytorch.mlls.VariationalELBO(m.likelihood, m, num_data))(m(x), y)
        v.backward()
        out.append((v.detach(), {k: p.grad.clone() for k, p in m.named_parameters()}))
    return out


@pytest.mark.parametrize("seed,rows,samples,training", [(0, 150, 8, True), (1, 20, 8, True), (2, 150, 4, False),
                                                        (3, 64, 1, False)])
def test_lean_elbo_matches_gpytorch(seed, rows, samples, training):
    m, x, y = _model(seed)
    (lv, lg), (gv, gg) = _both(m, x[:rows], y[:rows], 150, samples, training)
    torch.testing.assert_close(lv, gv, rtol=1e-5, atol=1e-5)
    for k in gg:
        scale = float(gg[k].abs().max()) + 1e-6
        torch.testing.assert_close(lg[k], gg[k], rtol=1e-3, atol=1e-4 * scale, msg=lambda s, k=k: f"{k}: {s}")


@pytest.mark.parametrize("perturb", ["kernel", "kl", "noise", "variance"])
def test_the_comparison_sees_a_wrong_term(perturb, monkeypatch):
    """The tolerance is tight enough that a small error in one term fails it."""
    m, x, y = _model(4)
    if perturb == "kernel":
        monkeypatch.setattr(lean_elbo, "_rbf", lambda k, a, b, f=lean_elbo._rbf: f(k, a, b) * 1.001)
    elif perturb == "kl":
        monkeypatch.setattr(lean_elbo, "_kl", lambda layer, low, f=lean_elbo._kl: f(layer, low) * 1.01)
    elif perturb == "noise":
        monkeypatch.setattr(lean_elbo, "_LOG_2PI", lean_elbo._LOG_2PI + 1e-3)
    else:
        def layer(*args, f=lean_elbo._layer):
            mean, var = f(*args)
            return mean, var * 1.01

        monkeypatch.setattr(lean_elbo, "_layer", layer)
    (lv, lg), (gv, gg) = _both(m, x, y, 150, 8, True)
    with pytest.raises(AssertionError):
        torch.testing.assert_close(lv, gv, rtol=1e-5, atol=1e-5)


def test_fit_map_lean_and_gpytorch_agree():
    """The MAP transfer with either objective ends at nearly the same parameters (the same draws)."""
    m, x, y = _model(5)
    m.eval()
    xs, ys = x[:40].numpy(), (y[:40].numpy() * m.y_std + m.y_mean) + 2.0
    a = m.copy().fit_map(xs, ys, l2=0.01, epochs=5, lr=0.02)
    b = m.copy().fit_map(xs, ys, l2=0.01, epochs=5, lr=0.02, lean=False)
    for (k, va), vb in zip(a.state_dict().items(), b.state_dict().values()):
        torch.testing.assert_close(va, vb, rtol=1e-3, atol=1e-4, msg=lambda s, k=k: f"{k}: {s}")


def test_falls_back_where_it_does_not_apply():
    x = np.random.default_rng(0).random((30, 4)).astype(np.float32)
    fresh = DeepGP(x, hidden_dims=2, num_inducing=8, seed=0)  # q(u) not initialized yet: GPyTorch's path first
    assert lean_elbo.elbo(fresh, torch.as_tensor(x), torch.zeros(30), 30, 4, True) is None
    fresh.fit(x, x[:, 0] * 3, epochs=1, batch_size=16)
    assert lean_elbo.elbo(fresh, torch.as_tensor(x), torch.zeros(30), 30, 4, True) is not None
