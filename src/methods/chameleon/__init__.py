"""Pieces of CHAMELEON ([Ahn-PhD] Ch. 2; Ahn et al., ICLR 2020; docs/REFERENCES.md): adaptive sampling and
sample synthesis (``sampling``) and the PPO explorer (``agent``). The method's loop is not built yet, so it
has no ``conf/method`` entry."""
