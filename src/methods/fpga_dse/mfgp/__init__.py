"""Multi-objective, multi-fidelity Gaussian-process pieces for FPGA design-space exploration ([Sun-PhD] Ch. 3).

Composable, BoTorch/GPyTorch style: surrogate models (``models``), acquisition functions
(``acquisition``), objective normalization (``objectives``), initial designs (``designs``) and the
ask/tell Bayesian-optimization driver shared by ``cgp``, ``dcgp``, ``fpl18`` and ``mes`` (``mfbo``).
Everything works in float64 on CPU; all objectives are minimized.
"""
