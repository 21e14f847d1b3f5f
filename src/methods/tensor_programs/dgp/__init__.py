"""Deep Gaussian process transfer learning ([Sun-ICCV21], [Sun-PhD] Ch. 4): the method, its deep GP,
and the layer groups that decide which history a task transfers from."""

from tunebench.methods.tensor_programs.dgp.method import DGP

__all__ = ["DGP"]
