"""``method=mes``: max-value entropy search with independent GPs inside the cgp loop ([Sun-PhD] §3.6.6,
the ablation of Table 3.5; [MESMO]; docs/METHODS.md §mes).

Independent ARD Matérn-5/2 GPs per objective, chained NARGP-style across fidelities; per fidelity the
MESMO acquisition over sampled objective minima, weighted by rho_i = T_top / T_i like PEIPV.
"""

from tunebench.methods.mfgp.mfbo import MultiFidelityBO, with_defaults

MES = with_defaults(MultiFidelityBO, "MES", __doc__, model="independent", chaining="nargp",
                    deep_kernel=None, acquisition="mes", optimizer="lbfgs")
