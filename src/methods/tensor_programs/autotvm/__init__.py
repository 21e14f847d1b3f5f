"""AutoTVM's XGBTuner ([AutoTVM]): the tuner and its XGBoost cost model (simulated annealing: ``methods.annealing``)."""

from tunebench.methods.tensor_programs.autotvm.tuner import AutoTVM

__all__ = ["AutoTVM"]
