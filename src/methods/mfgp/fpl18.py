"""``method=fpl18``: linear (AR1) multi-fidelity BO with independent GPs per objective (Lo & Chow,
FPL 2018, as described in [Sun-PhD] §3.1, §3.4.1 and §3.6.3; docs/METHODS.md §fpl18).

f_i(x) = rho_i f_{i-1}(x) + delta_i(x) per objective, each delta an ARD Matérn-5/2 GP; EIPV is exact for
the independent (diagonal) predictive distribution; the same cost-weighted fidelity choice and loop as
cgp, so only the model differs (our choice, for a like-for-like comparison).
"""

from tunebench.methods.mfgp.mfbo import MultiFidelityBO, with_defaults

FPL18 = with_defaults(MultiFidelityBO, "FPL18", __doc__, model="independent", chaining="ar1",
                      deep_kernel=None, acquisition="eipv", optimizer="lbfgs")
