"""``method=mes``: max-value entropy search with independent GPs inside the cgp loop ([Sun-PhD] §3.6.6,
the ablation of Table 3.5; [MESMO]; docs/METHODS.md §mes).

Independent ARD Matérn-5/2 GPs per objective, chained NARGP-style across fidelities; per fidelity the
MESMO acquisition over sampled objective minima, weighted by rho_i = T_top / T_i like PEIPV.
Hyperparameters: MESSettings in src/methods/fpga_dse/mfgp/settings.py.
"""

from tunebench.methods.fpga_dse.mfgp.mfbo import MultiFidelityBO
from tunebench.methods.fpga_dse.mfgp.settings import MESSettings


class MES(MultiFidelityBO):
    """mes: the driver (``mfbo``) with :class:`MESSettings` (independent GPs, MES acquisition)."""

    name = "mes"
    Settings = MESSettings
