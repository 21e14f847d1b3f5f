"""GTuner ([Sun-PhD] Ch. 5): MetaSchedule's search with the GAT cost model, its graph and statistical
features, and the training sets built from recorded runs."""

from tunebench.methods.tensor_programs.gat.method import GAT

__all__ = ["GAT"]
