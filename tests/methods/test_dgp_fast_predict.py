"""dgp's lean predictive mean (methods/tensor_programs/dgp/fast_predict.py) gives GPyTorch's numbers to the bit."""
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


@pytest.mark.parametrize("n,chunk,samples", [(128, 4096, 16), (300, 128, 8), (1, 4096, 4)])
def test_lean_mean_is_gpytorchs_to_the_bit(model, n, chunk, samples):
    x = np.random.default_rng(n).random((n, 6)).astype(np.float32)
    state = torch.random.get_rng_state()
    lean = [model.predict_mean(x, samples=samples, seed=s, chunk=chunk) for s in (0, 7)]
    ref = [model.predict_mean(x, samples=samples, seed=s, chunk=chunk, lean=False) for s in (0, 7)]
    assert all(np.array_equal(a, b) for a, b in zip(lean, ref))
    assert not np.array_equal(lean[0], lean[1])  # the seed matters: the draws are the layers' samples
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
