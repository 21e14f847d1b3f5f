"""``method=dcgp``: cgp with a deep kernel ([Sun-PhD] §3.4.4, §3.6.3; docs/METHODS.md §dcgp).

The ARD Matérn-5/2 kernel acts on phi_W(x), an MLP with output sizes 1000-500-50-6 (ReLU after the
first three) applied to the model's whole input (directive features, plus the lower fidelity's
prediction when chained); W and the GP hyperparameters are trained jointly by maximizing the exact
marginal likelihood (eq. 3.19) with Adam. Hyperparameters: DCGPSettings in src/methods/fpga_dse/mfgp/settings.py.
"""

from tunebench.methods.fpga_dse.mfgp.cgp import CGP
from tunebench.methods.fpga_dse.mfgp.settings import DCGPSettings


class DCGP(CGP):
    """dcgp: cgp with :class:`DCGPSettings` (a deep kernel fitted with Adam)."""

    name = "dcgp"
    Settings = DCGPSettings
