"""The measurement protocol: how tunebench turns timings into numbers a reviewer can audit.

- :mod:`~tunebench.protocol.stats`: summary statistics of timing samples (median, minimum, CV) and
  bootstrap confidence intervals for ratios;
- :mod:`~tunebench.protocol.noise`: the noise policy (thresholds), the verdict on a timing, and the
  CPU time other processes take while we time (Linux ``/proc``);
- :mod:`~tunebench.protocol.kernels`: fixed TVM kernels: the calibration kernel timed around every
  task, and the machine's own peak (FMA throughput, memory bandwidth);
- :mod:`~tunebench.protocol.machine`: the per-machine cache of the peak and of the quiet
  calibration reference;
- :mod:`~tunebench.protocol.model_worker`: worker-process handler that times whole models (TVM
  builds and PyTorch baselines) one block at a time, so they can be interleaved; its requests and
  answers are the dataclasses of :mod:`~tunebench.protocol.model_messages`.

This package sits below targets and the harness: it imports neither.
"""
