"""CHAMELEON ([Ahn-PhD] Ch. 2; Ahn et al., ICLR 2020; docs/REFERENCES.md): the loop (``tuner``), its settings
(``settings``: ChameleonSettings, AutoTVM's plus its own), adaptive sampling and sample synthesis (``sampling``)
and the PPO explorer (``agent``)."""
