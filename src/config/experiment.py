"""The harness's own settings: the experiment (top level), ``budget``, ``tracking``, ``measure`` and
``e2e``. The method, model and target groups are typed by their own settings classes
(:class:`MethodSettings`, :class:`ModelSettings`, :class:`TargetSettings` and their subclasses, each
in the package that owns it); the experiment holds them under their base types."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from omegaconf import MISSING

from tunebench.config.knobs import (
    NAME,
    NONNEG_INT,
    NONNEG_NUM,
    POS_INT,
    POS_NUM,
    Settings,
    bounded,
    choice,
    knob,
    opt,
    rule,
)
from tunebench.config.plugins import PATH_FORM, is_import_path

PLUGIN_CLASS = opt(rule(is_import_path, f"must be an import path {PATH_FORM}"))
MAX_TRIALS = 1_000_000  # per task: far beyond any published budget (1000); a larger number is a typo


@dataclass
class GroupSettings(Settings):
    """A config group's option: its ``name`` (the option chosen on the command line)."""

    name: str = knob(MISSING, NAME, "the option's name (method=..., model=..., target=...)")


@dataclass
class MethodSettings(GroupSettings):
    """Base of every method's settings (``method=<name>``)."""

    cls: str | None = knob(None, PLUGIN_CLASS, "a method from outside tunebench: its Method subclass, "
                                               "package.module:Class (docs/USAGE.md §Your own method)")


@dataclass
class ModelSettings(GroupSettings):
    """Base of every model's settings (``model=<name>``). ``workload``: what its tasks are, matched
    against what a target measures (``Target.workloads``)."""

    workload: ClassVar[str] = "tensor_program"

    def run_label(self) -> str:
        """The model as runs are tagged and the leaderboard groups them (default: its name)."""
        return self.name


@dataclass
class TargetSettings(GroupSettings):
    """Base of every target's settings (``target=<name>``): its ``kind`` picks the target class."""

    kind: str = knob(MISSING, NAME, "the target class (targets.TARGETS)")
    cls: str | None = knob(None, PLUGIN_CLASS, "a target from outside tunebench: its Target subclass, "
                                               "package.module:Class (docs/USAGE.md §Your own method)")
    batch_size: int = knob(1, POS_INT, "configs measured per round of the tuning loop")


@dataclass
class Budget(Settings):
    """Per-task budget (the ``budget`` group; presets in ``conf/budget/``).

    ``method_overrides.<method name>`` is merged into the method's settings when its name matches: a
    preset scales each method's sample sizes together with the trial budget, so that one sweep over
    methods stays fair."""

    OPEN_KEYS: ClassVar[tuple[str, ...]] = ("method_overrides",)
    trials_per_task: int = knob(16, bounded(1, MAX_TRIALS), "measurements per task; invalid ones count (AutoTVM "
                                                            "counts them too), configs the target rejects before "
                                                            "building them do not (max_static_rejects)")
    seconds_per_task: float | None = knob(None, opt(POS_NUM),
                                          "optional wall-clock limit per task (search clock, seconds); null = none")
    early_stopping: int | None = knob(None, opt(POS_INT),
                                      "stop a task after this many trials without improvement; null = never")
    max_static_rejects: int = knob(256, bounded(0, MAX_TRIALS),
                                   "configs in a row the target rejects before building them (target=cuda: the GPU's "
                                   "limits) that take no trial: the method is told and asked again; past this many, "
                                   "each rejected config is a failed trial (0 = every one is)")
    method_overrides: dict[str, Any] = knob(
        {}, rule(lambda v: isinstance(v, dict) and all(isinstance(x, dict) for x in v.values()),
                 "must map method names to mappings of settings"),
        "merged into the method's settings when its name matches (logged with the run's params)")


@dataclass
class TrackingSettings(Settings):
    uri: str | None = knob(None, opt(NAME), "null: embedded SQLite store sqlite:///<workdir>/mlflow.db; or "
                                            "http(s)://host:port")
    artifact_root: str | None = knob(None, opt(NAME), "null: <workdir>/mlartifacts for the embedded store; the "
                                                      "server's default otherwise")
    outage_wait_s: float = knob(60.0, NONNEG_NUM, "a server that went down mid-run: seconds the run's end keeps "
                                                  "retrying to deliver the spooled calls")


@dataclass
class NoiseSettings(Settings):
    """A timing is noisy when one of these is exceeded; it is re-measured, then marked."""

    cv_max: float = knob(0.05, NONNEG_NUM, "robust coefficient of variation (1.4826 x MAD / median) of a kernel "
                                           "timing's repeats (search, re-timing, calibration)")
    rounds_cv_max: float = knob(0.4, NONNEG_NUM, "the same over a whole-model row's samples, taken across "
                                                 "interleaved rounds (the e2e step)")
    foreign_cpu_max: float = knob(0.3, NONNEG_NUM, "cores other processes used while it was timed (Linux /proc; "
                                                   "CPU targets)")
    slowdown_max: float = knob(1.5, NONNEG_NUM, "calibration kernel time / the quiet reference (measure.noise.reference); "
                                                "marks absolute times, never an interleaved ratio")
    reference: str = knob("run", choice("run", "machine"), "the quiet reference: run = the run's first clean "
                                                           "calibration (renewed after reference_max_age_s); machine = "
                                                           "the fastest clean calibration ever cached for this machine")
    reference_max_age_s: float = knob(3600.0, POS_NUM, "reference=run: a reference older than this is renewed by the "
                                                       "next clean calibration")
    drift_max: float = knob(0.5, NONNEG_NUM, "|calibration after / calibration before - 1| around a task or the "
                                             "e2e step")
    remeasure: int = knob(1, bounded(0, 100), "a noisy timing is timed again this many times before it is marked noisy")


@dataclass
class RetimeSettings(Settings):
    """After each task: re-time its best configs, interleaved; the best reported is re-timed."""

    top_k: int = knob(3, bounded(1, 100), "distinct configs re-timed")
    rounds: int = knob(5, bounded(1, 1000), "interleaved rounds (each config once per round, rotating order, calibration "
                                   "after each)")
    repeat: int = knob(3, bounded(1, 1000), "time-evaluator repeats per config and round (runner.min_repeat_ms each)")


@dataclass
class QuietSettings(Settings):
    """Before each task and the e2e step, wait until other processes leave the CPU."""

    enabled: bool = knob(False, None, "off by default: noisy values are marked instead")
    max_wait_s: float = knob(600.0, NONNEG_NUM, "then go on (values are still checked and marked)")


@dataclass
class MeasureSettings(Settings):
    """The measurement protocol (docs/MEASUREMENT.md); targets that time kernels (llvm, cuda)."""

    noise: NoiseSettings = knob(factory=NoiseSettings, doc="noise thresholds")
    calibrate: bool = knob(True, None, "time the calibration kernel before and after every task and around the "
                                       "e2e step")
    peak: bool = knob(True, None, 'measure this machine\'s FMA and memory peak once (cached) for "% of peak"')
    retime: RetimeSettings = knob(factory=RetimeSettings, doc="re-timing of each task's best configs")
    wait_for_quiet: QuietSettings = knob(factory=QuietSettings, doc="waiting for a quiet machine")
    lock_notice_s: float = knob(3.0, NONNEG_NUM, "waiting this long for another process's device lock prints who "
                                                 "holds it")
    cache_dir: str | None = knob(None, opt(NAME), "per-machine peak and calibration reference; null = "
                                                  "$XDG_CACHE_HOME/tunebench or ~/.cache/tunebench")


@dataclass
class E2ESettings(Settings):
    """End-to-end latency after all tasks are tuned (docs/MEASUREMENT.md)."""

    enabled: bool = knob(True, None, "the whole model with each task's best schedule, checked, timed against the "
                                     "baselines")
    rounds: int = knob(5, bounded(1, 1000), "interleaved rounds: every row (tuned, TVM default, PyTorch, torch.compile) "
                                   "once per round; also the rounds of each task's tuned-vs-default kernel comparison")
    timings: int = knob(3, bounded(1, 100), "separate interleaved timings of `rounds` rounds each (each between its "
                                            "own calibrations); a speedup = the geometric mean of the timings' ratios, "
                                            "its 95 % interval Student t over them (1 = over the rounds of one timing)")
    n_runs: int = knob(10, bounded(1, 100_000), "timed samples per row in each timing (ceil(n_runs / rounds) per round); the "
                                    "latency is the median of all the timings' samples")
    warmup: int = knob(1, bounded(0, 1000), "untimed samples at the start of every block (row x round)")
    min_sample_ms: int = knob(20, NONNEG_INT, "a sample = the mean of as many back-to-back inferences as take this "
                                              "long (at least one)")
    default_n_runs: int = knob(3, bounded(0, 100_000), "timed samples of TVM's untuned default build (often 10x slower): its "
                                              "first rounds only; 0 = leave it out")
    torch_compile: bool = knob(True, None, "also time torch.compile(model) (FP32), if it compiles within "
                                           "torch_compile_timeout_s")
    torch_compile_timeout_s: float = knob(600.0, POS_NUM, "seconds torch.compile may take")
    load_timeout_s: float = knob(600.0, POS_NUM, "loading (and running once) any other row")
    keep_freed_memory: bool = knob(True, None, "row workers: glibc malloc keeps freed memory (no per-call mmap); "
                                               "false = glibc defaults")
    tolerance: float = knob(1e-4, POS_NUM, "max |out - torch| / max |torch| for the tuned model's output to count "
                                           "as correct")
    default_kernels: bool = knob(True, None, "each task takes the faster of its tuned kernel and TVM's default kernel, "
                                             "timed interleaved (rounds x kernel_repeat); false = always the tuned one")
    kernel_repeat: int = knob(3, bounded(1, 1000), "time-evaluator repeats of each kernel per round (min_sample_ms each) "
                                                   "in the tuned-vs-default kernel comparison")


@dataclass
class ExperimentConfig(Settings):
    """One experiment (one Hydra job, one MLflow run): ``conf/config.yaml`` chooses the groups."""

    method: MethodSettings = knob(MISSING, None, "the tuning method (method=<name>)")
    model: ModelSettings = knob(MISSING, None, "the model whose tasks are tuned (model=<name>)")
    target: TargetSettings = knob(MISSING, None, "where configs are measured (target=<name>)")
    budget: Budget = knob(factory=Budget, doc="per-task budget (budget=<preset>)")
    seed: int = knob(0, NONNEG_INT, "seeds the method's generator; per task: numpy default_rng([seed, task id])")
    resume: str | None = knob(None, opt(NAME), "an MLflow run id: continue that run from its record file, "
                                               "measuring nothing twice")
    experiment: str = knob("tunebench", NAME, "MLflow experiment name")
    tracking: TrackingSettings = knob(factory=TrackingSettings, doc="MLflow tracking")
    workdir: str = knob(MISSING, NAME, "where mlflow.db, mlartifacts/ and records/ live (default: the directory "
                                       "run.py started in)")
    records_dir: str = knob("records", NAME, "record files: <workdir>/<records_dir>/<run id>/records.jsonl "
                                             "(+ config.yaml, tasks.json)")
    check_correctness: bool = knob(True, None, "check each task's best config against the unscheduled task's "
                                               "output")
    progress: bool = knob(True, None, "live rich progress rows (only on a terminal; log lines are always written)")
    measure: MeasureSettings = knob(factory=MeasureSettings, doc="the measurement protocol (docs/MEASUREMENT.md)")
    e2e: E2ESettings = knob(factory=E2ESettings, doc="end-to-end latency after all tasks are tuned")


