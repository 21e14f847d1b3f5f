"""The measurement protocol: how tunebench turns timings into numbers a reviewer can audit.

- :mod:`~tunebench.protocol.stats`: summary statistics of timing samples (median, minimum, CV) and
  bootstrap confidence intervals for ratios;
- :mod:`~tunebench.protocol.noise`: the noise policy (thresholds), the verdict on a timing, and the
  CPU time other processes take while we time (Linux ``/proc``);
- :mod:`~tunebench.protocol.machine`: the per-machine cache of the peak and of the quiet
  calibration reference;
- :mod:`~tunebench.protocol.methodology`: the methodology score of tuning methods on measured spaces.

The kernels it times on a TVM target (calibration, peak) and the TVM sessions on remote devices are
the target's (:mod:`tunebench.targets.tvm.fixed_kernels`, :mod:`tunebench.targets.tvm.remote`).

This package sits below targets and the harness: it imports neither.
"""
