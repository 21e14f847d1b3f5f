"""``method=cgp``: correlated multi-objective, non-linear multi-fidelity GP Bayesian optimization
([Sun-PhD] Ch. 3, §3.4.1-3.4.3, Alg. 2; docs/METHODS.md §cgp).

Per fidelity an ICM GP over the objectives with an ARD Matérn-5/2 kernel; fidelities chained NARGP-style;
acquisition PEIPV = rho_i * EIPV_i; argmax over the pruned discrete space. The driver and the models are
in ``tunebench.methods.mfgp``; this module fixes the defaults (conf/method/cgp.yaml lists them all).
"""

from tunebench.methods.mfgp.mfbo import MultiFidelityBO, with_defaults

CGP = with_defaults(MultiFidelityBO, "CGP", __doc__, model="icm", chaining="nargp", deep_kernel=None,
                    acquisition="eipv", optimizer="lbfgs")
