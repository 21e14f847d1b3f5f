"""Models and acquisition functions of tunebench.methods.fpga_dse.mfgp ([Sun-PhD] Ch. 3, docs/REFERENCES.md): brute-force checks."""

import math

import numpy as np
import pytest
import torch

from tunebench.methods.fpga_dse.mfgp import acquisition as acq
from tunebench.methods.fpga_dse.mfgp.chain import FidelityChain
from tunebench.methods.fpga_dse.mfgp.designs import nested_random, rted
from tunebench.methods.fpga_dse.mfgp.models import ICMGP, FitSettings, IndependentGP
from tunebench.methods.fpga_dse.mfgp.objectives import ObjectiveScaler, capacity_key, penalize_invalid

torch.set_num_threads(1)


def _matern52(A, B, ls):
    d = np.sqrt((((A[:, None, :] - B[None, :, :]) / ls) ** 2).sum(-1))
    return (1 + math.sqrt(5) * d + 5 * d ** 2 / 3) * np.exp(-math.sqrt(5) * d)


def _toy():
    rng = np.random.default_rng(0)
    X = rng.random((12, 2))
    Y = np.stack([X.sum(1), -X.sum(1) + 0.3 * np.sin(5 * X[:, 0]), X[:, 0] ** 2], 1)
    return X, Y


def test_icm_covariance_matches_brute_force_kronecker():
    """Prior and posterior of the ICM GP equal the textbook formulas with K = B (x) k_Matern (eq. 3.14)."""
    X, Y = _toy()
    m = ICMGP(2, 0, 3, fit=FitSettings("lbfgs", 15, 5))
    m.fit(X, Y)
    gp = m.model
    ls = gp.covar_module.data_covar_module.lengthscale.detach().numpy().ravel()
    B = m.task_covariance().numpy()
    noise = gp.likelihood.task_noises.detach().numpy().ravel()
    const = np.array([mm.constant.item() for mm in gp.mean_module.base_means])
    assert np.abs(B - B.T).max() < 1e-12 and np.linalg.eigvalsh(B).min() > 0   # a real task covariance
    assert abs(B[0, 1]) > 0.1 * math.sqrt(B[0, 0] * B[1, 1])                   # objectives 0 and 1 correlate

    Xt = np.random.default_rng(1).random((5, 2))
    n, N, M = len(X), len(Xt), 3
    # prior: interleaved ordering (point-major, objective-minor) = kron(Kx, B)
    with torch.no_grad():
        prior = gp.covar_module(torch.as_tensor(Xt)).to_dense().numpy()
    assert np.allclose(prior, np.kron(_matern52(Xt, Xt, ls), B), atol=1e-10)
    # posterior by brute force in standardized units
    Ys = (Y - Y.mean(0)) / Y.std(0, ddof=1)
    K = np.kron(_matern52(X, X, ls), B) + np.kron(np.eye(n), np.diag(noise))
    Ks = np.kron(_matern52(Xt, X, ls), B)
    Kss = np.kron(_matern52(Xt, Xt, ls), B)
    resid = (Ys - const).reshape(-1)
    mean = (const + (Ks @ np.linalg.solve(K, resid)).reshape(N, M)) * Y.std(0, ddof=1) + Y.mean(0)
    cov = (Kss - Ks @ np.linalg.solve(K, Ks.T)).reshape(N, M, N, M)[np.arange(N), :, np.arange(N), :]
    cov = cov * np.outer(Y.std(0, ddof=1), Y.std(0, ddof=1))
    mu, sigma = m.predict(Xt)
    assert np.allclose(mu.numpy(), mean, atol=1e-6)
    assert np.allclose(sigma.numpy(), cov, atol=1e-6)
    assert (np.abs(cov[:, 0, 1]) > 1e-8).any()          # non-diagonal predictive covariance


def test_models_fit_toy_functions():
    def f(X):
        return np.stack([X.sum(1), -X.sum(1) + 0.3 * np.sin(3 * X[:, 0]), X[:, 0] ** 2], 1)
    X = np.random.default_rng(0).random((25, 2))
    Y = f(X)
    Xt = np.random.default_rng(2).random((50, 2))
    Yt = f(Xt)
    for model in (ICMGP(2, 0, 3), IndependentGP(2, 0, 3), ICMGP(2, 0, 3, deep=(32, 16, 6), fit=FitSettings("adam", 150, 20))):
        model.fit(X, Y)
        mu, cov = model.predict(Xt)
        rmse = np.sqrt(((mu.numpy() - Yt) ** 2).mean(0))
        assert (rmse < 0.3 * Yt.std(0)).all(), (type(model).__name__, model.deep, rmse) if hasattr(model, 'deep') else rmse
        assert (cov.diagonal(dim1=-2, dim2=-1) >= 0).all()


def test_deep_kernel_architecture():
    from tunebench.methods.fpga_dse.mfgp.models import deep_features

    net = deep_features(5)
    sizes = [layer.out_features for layer in net if isinstance(layer, torch.nn.Linear)]
    relus = [i for i, layer in enumerate(net) if isinstance(layer, torch.nn.ReLU)]
    assert sizes == [1000, 500, 50, 6] and len(relus) == 3 and not isinstance(net[-1], torch.nn.ReLU)


def test_nargp_and_ar1_chains_beat_single_fidelity_on_high_fidelity():
    """With many cheap points and few expensive ones, chaining predicts the expensive fidelity better."""
    rng = np.random.default_rng(3)
    def f0(X):
        return np.stack([np.sin(6 * X[:, 0]) + X[:, 1], X[:, 0] + X[:, 1]], 1)
    def f1(X):
        return np.stack([f0(X)[:, 0] ** 2 + 0.1 * X[:, 1], 1.5 * f0(X)[:, 1] + 0.2], 1)
    Xl = rng.random((30, 2))
    Xh = Xl[:10]
    Xt = rng.random((100, 2))
    single = ICMGP(2, 0, 2)
    single.fit(Xh, f1(Xh))
    err_single = np.abs(single.predict(Xt)[0].numpy() - f1(Xt)).mean()
    for chaining, make in (("nargp", lambda k, dx, df: ICMGP(dx, df, 2)),
                           ("ar1", lambda k, dx, df: IndependentGP(dx, df, 2, link="ar1" if df else "none"))):
        chain = FidelityChain(2, 2, 2, make, chaining)
        chain.fit([(Xl, f0(Xl)), (Xh, f1(Xh))])
        err = np.abs(chain.predict(1, Xt)[0].numpy() - f1(Xt)).mean()
        assert err < 0.5 * err_single, (chaining, err, err_single)


def test_hypervolume_and_cells_hand_example():
    Y = np.array([[1.0, 3.0], [2.0, 2.0], [3.0, 1.0], [3.5, 3.5]])
    ref = np.array([4.0, 4.0])
    assert acq.hypervolume(Y, ref) == pytest.approx(6.0)   # 3x1 + 2x1 + 1x1
    assert acq.pareto_mask(Y).tolist() == [True, True, True, False]
    lower, upper = acq.nondominated_cells(Y, ref)
    # improvement of a point = HV(Y + point) - HV(Y)
    for p in ([0.5, 0.5], [1.5, 1.5], [2.5, 3.9], [3.9, 3.9], [5.0, 0.0]):
        gain = acq.hypervolume(np.vstack([Y, p]), ref) - acq.hypervolume(Y, ref)
        assert float(acq.hv_improvement(torch.tensor(p), lower, upper)) == pytest.approx(gain)


def _random_front(rng, M=3, n=6):
    Y = rng.random((n, M)) * 0.8
    return Y, np.ones(M)


def test_eipv_exact_matches_monte_carlo():
    rng = np.random.default_rng(4)
    Y, ref = _random_front(rng)
    lower, upper = acq.nondominated_cells(Y, ref)
    mean = rng.random((4, 3)) * 0.9
    std = 0.05 + 0.3 * rng.random((4, 3))
    exact = acq.eipv_independent(mean, std, lower, upper).numpy()
    z = torch.as_tensor(rng.standard_normal((200_000, 3)))
    for i in range(4):
        samples = torch.as_tensor(mean[i]) + torch.as_tensor(std[i]) * z
        mc = acq.hv_improvement(samples, lower, upper).numpy()
        assert exact[i] == pytest.approx(mc.mean(), abs=4 * mc.std() / math.sqrt(len(mc)) + 1e-9)
    # cross-check the cells: improvement by brute-force hypervolume for a few samples
    for s in rng.random((5, 3)):
        gain = acq.hypervolume(np.vstack([Y, s]), ref) - acq.hypervolume(Y, ref)
        assert float(acq.hv_improvement(torch.as_tensor(s), lower, upper)) == pytest.approx(gain, abs=1e-12)


def test_eipv_qmc_correlated_matches_monte_carlo():
    rng = np.random.default_rng(5)
    Y, ref = _random_front(rng)
    lower, upper = acq.nondominated_cells(Y, ref)
    mean = rng.random((3, 3)) * 0.9
    A = rng.standard_normal((3, 3, 3)) * 0.15
    cov = A @ A.transpose(0, 2, 1) + 0.002 * np.eye(3)
    qmc = acq.eipv_qmc(mean, cov, lower, upper, n_samples=4096, seed=1).numpy()
    for i in range(3):
        samples = torch.as_tensor(rng.multivariate_normal(mean[i], cov[i], size=200_000))
        mc = acq.hv_improvement(samples, lower, upper).numpy()
        assert qmc[i] == pytest.approx(mc.mean(), abs=4 * mc.std() / math.sqrt(len(mc)) + 1e-6)
    # correlation matters: the same marginals, independent, give a different value
    indep = acq.eipv_independent(mean, np.sqrt(cov.diagonal(axis1=1, axis2=2)), lower, upper).numpy()
    diag = acq.eipv_qmc(mean, np.array([np.diag(c.diagonal()) for c in cov]), lower, upper, 4096, 1).numpy()
    assert np.allclose(diag, indep, rtol=0.02, atol=1e-5)
    assert not np.allclose(qmc, indep, rtol=0.05)


def test_fidelity_weights_seed_table_3_1():
    """rho_i = T_impl / T_i with T_i cumulative ([Sun-PhD] Eq. 3.15); GEMM's Table 3.1 tool times."""
    rho = acq.fidelity_weights([137.75, 1379.67, 1744.61])
    total = 137.75 + 1379.67 + 1744.61
    assert rho == pytest.approx([total / 137.75, total / (137.75 + 1379.67), 1.0])
    with pytest.raises(ValueError):
        acq.fidelity_weights([0.0, 1.0])


def test_mes_prefers_uncertain_points_near_sampled_minimum():
    mins = torch.tensor([[0.0, 0.0]])
    a = acq.mes(torch.tensor([[0.1, 0.1], [2.0, 2.0], [0.1, 0.1]]), torch.tensor([[0.3, 0.3], [0.3, 0.3], [0.01, 0.01]]), mins)
    assert a[0] > a[1] and a[0] > a[2] and (a >= -1e-9).all()
    mean = torch.zeros(4, 2)
    cov = torch.eye(4).expand(2, 4, 4).clone() * 0.25
    sampled = acq.sample_min_values(mean, cov, 2000, torch.Generator().manual_seed(0))
    expected = np.mean(np.min(np.random.default_rng(0).standard_normal((200_000, 4)) * 0.5, axis=1))
    assert float(sampled.mean()) == pytest.approx(expected, abs=0.03)


def test_objective_scaler_and_invalid_penalty():
    cap = {"LUT": 24288, "dsp": 28}
    assert capacity_key("lut", cap) == "LUT" and capacity_key("luts", cap) == "LUT" and capacity_key("delay_s", cap) is None
    sc = ObjectiveScaler(["delay_s", "lut", "dsp"], cap, [{"delay_s": 2.0, "lut": 10, "dsp": 1},
                                                          {"delay_s": 5.0, "lut": 20, "dsp": 2}])
    assert sc({"delay_s": 5.0, "lut": 24288, "dsp": 14}) == pytest.approx([0.5, 1.0, 0.5])
    Y = np.array([[0.2, 0.3], [0.4, 0.1], [0.0, 0.0]])
    out = penalize_invalid(Y, [True, True, False], 10.0)
    assert out[2].tolist() == pytest.approx([4.0, 3.0])
    assert out[:2].tolist() == Y[:2].tolist()


def test_initial_designs_nested_and_rted_spread():
    sets = nested_random(100, [8, 5, 3], np.random.default_rng(0))
    assert [len(s) for s in sets] == [8, 5, 3] and set(sets[2]) <= set(sets[1]) <= set(sets[0])
    assert len(set(sets[0])) == 8
    with pytest.raises(ValueError):
        nested_random(100, [3, 8], np.random.default_rng(0))
    grid = np.array([[i / 9, j / 9] for i in range(10) for j in range(10)])
    picked = rted(grid, 4, np.random.default_rng(0), pool=100)
    pts = grid[picked]
    assert len(set(picked)) == 4
    # representative: the 4 points are spread (not clumped): min pairwise distance > 0.25
    d = np.sqrt(((pts[:, None] - pts[None]) ** 2).sum(-1)) + np.eye(4) * 9
    assert d.min() > 0.25
