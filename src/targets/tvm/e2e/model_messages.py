"""The requests of the end-to-end step to a whole-model worker, and what the worker answers.

:mod:`tunebench.targets.tvm.e2e.timing` sends them; :func:`tunebench.targets.tvm.e2e.model_worker.handle`
answers them (on a remote device, the TVM rows run in the target's runner worker, whose handler
passes them on). Every message is a frozen dataclass, pickled across the process border; a load
carries the model's arrays (numpy; PyTorch's module and tensors for a PyTorch row).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tunebench.targets.tvm.remote import DeviceResult


@dataclass(frozen=True)
class LoadTvmInput:
    """``"load_tvm"``: load an exported Relax executable on a Relax VM and run it once."""

    lib_path: str  # the exported executable
    device: list  # device spec: ``["cpu", 0]``, ``["cuda", i]`` or ``["rpc", {...}]``
    params: list  # the weights (numpy arrays), in the order of ``main``'s parameters after the inputs
    inputs: list  # the model's inputs (numpy arrays)
    row: str = "row"  # the row's name (one worker may hold several rows)


@dataclass(frozen=True)
class LoadTorchInput:
    """``"load_torch"``: move a PyTorch module to its device and run it once under ``torch.inference_mode``."""

    module: Any  # the ``torch.nn.Module``
    inputs: list  # its inputs (tensors)
    threads: int  # ``torch.set_num_threads``
    device: str  # "cpu" or "cuda"
    tf32: bool  # allow TF32 tensor cores for matmul and cuDNN (False: strict FP32)
    compile: bool  # wrap the module in ``torch.compile`` (the first call compiles)
    row: str = "row"  # the row's name (one worker may hold several rows)


@dataclass(frozen=True)
class LoadOrtInput:
    """``"load_ort"``: an ONNX Runtime session (CPU execution provider) on an ONNX file, run once."""

    path: str  # the .onnx file
    names: list  # its inputs' names
    inputs: list  # its inputs (numpy arrays)
    threads: int  # intra-op threads (one inter-op thread, sequential execution)
    row: str = "row"  # the row's name (one worker may hold several rows)
    device: str = "cpu"  # where it runs: the CPU execution provider


@dataclass(frozen=True, kw_only=True)
class LoadResult(DeviceResult):
    """What every load answers."""

    outputs: list  # the outputs of the one inference (numpy arrays)
    load_s: float  # seconds the load took


@dataclass(frozen=True)
class TimeInput:
    """``"time"``: ``n`` samples of a loaded row after ``warmup`` untimed ones; a sample is the mean time
    of as many back-to-back inferences as fill ``min_sample_ms``."""

    n: int  # timed samples
    warmup: int = 0  # untimed samples before them
    min_sample_ms: int = 0  # minimum milliseconds of one sample
    row: str = "row"  # the loaded row to time
    device: list | str | None = None  # the row's device (its load's); a remote one runs in the worker's session


@dataclass(frozen=True, kw_only=True)
class TimeResult(DeviceResult):
    """What ``"time"`` answers."""

    samples: list[float]  # seconds per inference, one per sample
