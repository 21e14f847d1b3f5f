"""The run's end-to-end step on a target that times kernels: the whole model (or each single
operator) with every task's best schedule, checked and timed against TVM's default build and the
PyTorch baselines. :mod:`.kernels` gives each task the faster of its tuned and TVM's default kernel,
:mod:`.build` makes and checks the builds, :mod:`.timing` times the rows in interleaved rounds,
:mod:`.step` runs it for a run and logs its metrics."""

from tunebench.harness.e2e.errors import E2EError

__all__ = ["E2EError"]
