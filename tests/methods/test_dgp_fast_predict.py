"""dgp's lean predictive mean (methods/tensor_programs/dgp/fast_predict.py) gives GPyTorch's numbers (float
rounding apart), also after the model's parameters change."""
import numpy as np
import pytest
import torch

from tunebench.methods.tensor_programs.dgp.model import DeepGP


@pytest.fixture(scope="module")
def model():
    rng = np.random.default_rng(0)
    x = rng.random((150, 6)).astype(np.float32)
    y = 10 * np.sin(3 * x[:, 0]) + 5 * x[:, 1] ** 2 + 0.1 * rng.normal(size=150)
    m = DeepGP(x, hidden_dims=3, num_inducing=24, seed=1).fit(x, y, epochs=5, lr=0.03, batch_size=64)
    return m.copy().fit_map(x[:40], y[:40] + 2.0, l2=0.01, epochs=3, lr=0.02)  # as dgp's transfer leaves it


def _close(a, b):
    """Equal to float32 rounding: 1e-5 of the predictions' spread (their units: the targets')."""
    np.testing.assert_allclose(a, b, rtol=0, atol=1e-5 * float(np.ptp(b) + 1))


def _lean_applies(m, x, samples):
    from tunebench.methods.tensor_programs.dgp.fast_predict import mean_of

    with torch.no_grad():
        return mean_of(m, torch.as_tensor(x), samples) is not None


@pytest.mark.parametrize("n,chunk,samples", [(128, 4096, 16), (300, 128, 8), (1, 4096, 4)])
def test_lean_mean_is_gpytorchs(model, n, chunk, samples):
    x = np.random.default_rng(n).random((n, 6)).astype(np.float32)
    model.predict_mean(x[:2], samples=samples)  # GPyTorch's path caches its Cholesky factors
    assert _lean_applies(model, x, samples)
    state = torch.random.get_rng_state()
    lean = [model.predict_mean(x, samples=samples, seed=s, chunk=chunk) for s in (0, 7)]
    ref = [model.predict_mean(x, samples=samples, seed=s, chunk=chunk, lean=False) for s in (0, 7)]
    for a, b in zip(lean, ref):
        _close(a, b)
    assert not np.allclose(lean[0], lean[1], rtol=0, atol=1e-3)  # the seed matters: the draws are the layers'
    assert torch.equal(torch.random.get_rng_state(), state)  # the caller's generator is left alone


def test_lean_mean_applies_after_the_first_call_and_falls_back_before(model):
    from tunebench.methods.tensor_programs.dgp.fast_predict import mean_of

    fresh = model.copy()
    x = torch.rand(10, 6)
    fresh.train()
    fresh.eval()  # the Cholesky factors are gone: GPyTorch's path computes them first
    with torch.no_grad():
        assert mean_of(fresh, x, 4) is None
        fresh.predict_mean(x.numpy(), samples=4)
        assert mean_of(fresh, x, 4) is not None


def test_a_fresh_models_first_call_takes_the_lean_path_too(model):
    """``prime`` has GPyTorch cache the factors on one row first (its draws discarded): the first call on a
    fixed model gives what later calls give, to the bit, and GPyTorch's numbers to rounding."""
    from tunebench.methods.tensor_programs.dgp import fast_predict

    fresh = model.copy()
    fresh.train()
    fresh.eval()
    x = np.random.default_rng(5).random((300, 6)).astype(np.float32)
    calls = []
    original = fast_predict.mean_of

    def counted(*args):
        out = original(*args)
        calls.append(out is not None)
        return out

    fast_predict.mean_of = counted
    try:
        state = torch.random.get_rng_state()
        first = fresh.predict_mean(x, samples=8, seed=4, chunk=128)
        assert torch.equal(torch.random.get_rng_state(), state)
    finally:
        fast_predict.mean_of = original
    assert calls == [True, True, True]  # every chunk, the first one included
    np.testing.assert_array_equal(first, fresh.predict_mean(x, samples=8, seed=4, chunk=128))
    _close(first, fresh.predict_mean(x, samples=8, seed=4, chunk=128, lean=False))


def test_prime_leaves_a_model_in_training_mode_alone(model):
    from gpytorch.utils.memoize import _is_in_cache_ignore_args

    from tunebench.methods.tensor_programs.dgp.fast_predict import prime

    m = model.copy()
    m.train()
    with torch.no_grad():
        prime(m, torch.rand(4, 6), 8)
    for layer in (m.hidden, m.output):
        assert not _is_in_cache_ignore_args(layer.variational_strategy, "cholesky_factor")


def _shift(name, by, refit=False):
    def change(m):
        with torch.no_grad():
            dict(m.named_parameters())[name].add_(by)
        if refit:  # as fit() leaves a model: GPyTorch drops its cached factor and variational distribution
            m.train()
            m.eval()
    return change


def _load_shifted(m):
    state = {k: v.clone() for k, v in m.state_dict().items()}
    for k in ("hidden.variational_strategy._variational_distribution.variational_mean",
              "output.variational_strategy._variational_distribution.chol_variational_covar"):
        state[k] += 0.3
    m.load_state_dict(state)  # in eval mode: GPyTorch keeps its Cholesky factors (K_ZZ is unchanged)


@pytest.mark.parametrize("change", [
    _shift("output.variational_strategy._variational_distribution.variational_mean", 0.5),
    _shift("hidden.variational_strategy._variational_distribution.chol_variational_covar", 0.2, refit=True),
    _shift("hidden.covar_module.raw_outputscale", 0.5, refit=True),
    _shift("output.mean_module.raw_constant", 1.0),
    _load_shifted,
], ids=["output-mean", "hidden-covar", "hidden-kernel", "prior-mean", "load_state_dict"])
def test_lean_mean_follows_parameter_changes(model, change):
    """The precomputed ``L⁻ᵀ m`` and ``L⁻ᵀ (S − I) L⁻¹`` are dropped when a parameter changes (in place, in
    eval mode, or by ``load_state_dict``) or GPyTorch drops its caches (``train()``/``eval()``)."""
    m = model.copy()
    x = np.random.default_rng(3).random((64, 6)).astype(np.float32)
    m.predict_mean(x[:2], samples=8)
    before = m.predict_mean(x, samples=8, seed=1)
    change(m)
    m.predict_mean(x[:2], samples=8)  # after train()/eval(): GPyTorch's path caches the factors again
    assert _lean_applies(m, x, 8)
    after = m.predict_mean(x, samples=8, seed=1)
    assert not np.allclose(after, before, rtol=0, atol=1e-3)
    _close(after, m.predict_mean(x, samples=8, seed=1, lean=False))


def test_mean_only_output_layer_keeps_the_covariance_right(model):
    """With the output layer's dense covariance update left lazy, the mean is the same and the covariance,
    if read, the same matrix."""
    import gpytorch

    from tunebench.methods.tensor_programs.dgp.model import mean_only

    x = torch.rand(20, 6)
    with torch.no_grad(), gpytorch.settings.num_likelihood_samples(4):
        torch.manual_seed(3)
        full = model(x)
        torch.manual_seed(3)
        with mean_only(model.output):
            lazy = model(x)
        assert torch.equal(full.mean, lazy.mean)
        torch.testing.assert_close(lazy.covariance_matrix, full.covariance_matrix, rtol=1e-4, atol=1e-5)
