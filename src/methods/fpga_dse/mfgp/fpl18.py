"""``method=fpl18``: linear (AR1) multi-fidelity BO with independent GPs per objective (Lo & Chow,
FPL 2018, as described in [Sun-PhD] §3.1, §3.4.1 and §3.6.3; docs/METHODS.md §fpl18).

f_i(x) = rho_i f_{i-1}(x) + delta_i(x) per objective, each delta an ARD Matérn-5/2 GP; EIPV is exact for
the independent (diagonal) predictive distribution; the same cost-weighted fidelity choice and loop as
cgp, so only the model differs (our choice, for a like-for-like comparison). Hyperparameters:
FPL18Settings in src/methods/fpga_dse/mfgp/settings.py.
"""

from tunebench.methods.fpga_dse.mfgp.mfbo import MultiFidelityBO
from tunebench.methods.fpga_dse.mfgp.settings import FPL18Settings


class FPL18(MultiFidelityBO):
    """fpl18: the driver (``mfbo``) with :class:`FPL18Settings` (independent GPs, AR1 link)."""

    name = "fpl18"
    Settings = FPL18Settings
