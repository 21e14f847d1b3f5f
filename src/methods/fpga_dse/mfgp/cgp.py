"""``method=cgp``: correlated multi-objective, non-linear multi-fidelity GP Bayesian optimization
([Sun-PhD] Ch. 3, §3.4.1-3.4.3, Alg. 2; docs/METHODS.md §cgp).

Per fidelity an ICM GP over the objectives with an ARD Matérn-5/2 kernel; fidelities chained NARGP-style;
acquisition PEIPV = rho_i * EIPV_i; argmax over the pruned discrete space. The driver and the models are
in ``tunebench.methods.fpga_dse.mfgp``; the hyperparameters (all of them, with their sources) are CGPSettings in
src/methods/fpga_dse/mfgp/settings.py.
"""

from tunebench.methods.fpga_dse.mfgp.mfbo import MultiFidelityBO
from tunebench.methods.fpga_dse.mfgp.settings import CGPSettings


class CGP(MultiFidelityBO):
    """cgp: the driver (``mfbo``) with :class:`CGPSettings` (see the module docstring)."""

    name = "cgp"
    Settings = CGPSettings
