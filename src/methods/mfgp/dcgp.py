"""``method=dcgp``: cgp with a deep kernel ([Sun-PhD] §3.4.4, §3.6.3; docs/METHODS.md §dcgp).

The ARD Matérn-5/2 kernel acts on phi_W(x), an MLP with output sizes 1000-500-50-6 (ReLU after the
first three) applied to the model's whole input (directive features, plus the lower fidelity's
prediction when chained); W and the GP hyperparameters are trained jointly by maximizing the exact
marginal likelihood (eq. 3.19) with Adam.
"""

from tunebench.methods.mfgp.mfbo import MultiFidelityBO, with_defaults

DCGP = with_defaults(MultiFidelityBO, "DCGP", __doc__, model="icm", chaining="nargp",
                     deep_kernel=(1000, 500, 50, 6), acquisition="eipv", optimizer="adam",
                     fit_steps=50, refit_steps=10, lr=0.01)
