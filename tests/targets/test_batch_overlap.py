"""Building a batch while its built configs are timed (``target.builder.overlap``), on llvm with a fake slow
compile (:func:`faulty_handlers.handle_slow_build`): the device is timed one config after another, yet the
batch's wall time is less than its build and run phases one after the other; the results (order, invalid
entries) are those of the phases one after the other. Assertions are on the recorded intervals, never on
absolute speed."""

import pytest

from conftest import TINY_LAYER, measure_settings, target_settings
from faulty_handlers import SLOW_BUILD_S
from tunebench.harness.metrics import TIME_SPLIT, time_split
from tunebench.targets.tvm.llvm import LLVMTarget
from tunebench.targets.tvm.templates import get_template
from tunebench.targets.tvm.workloads.tasks import model_tasks
from tunebench.task import Outcome


@pytest.fixture(scope="module")
def tiny_task():
    tasks, _ = model_tasks({"name": "layers", "layers": [TINY_LAYER]}, "llvm")
    task = tasks[0]
    task.space = get_template(task.kind, "llvm").make_space(task.mod)
    return task


def _configs(space, n: int) -> list:
    """``n`` configs, the first two buildable (index not divisible by 3), two that fail to build."""
    good = [i for i in range(space.size) if i % 3][:n - 2]
    return [space.get(i) for i in good[:2] + [0, 3] + good[2:]]


def test_overlapped_batch_times_while_building_and_gives_the_same_results(tmp_path, tiny_task):
    cfg = target_settings("llvm", lock_dir=str(tmp_path), handler="faulty_handlers:handle_slow_build",
                          batch_size=6, builder={"n_parallel": 2}, runner={"repeat": 2, "min_repeat_ms": 1})
    target = LLVMTarget(cfg, measure_settings(cache_dir=str(tmp_path / "cache")))
    configs = _configs(tiny_task.space, 6)
    try:
        assert not target.overlap  # a CPU's default: one phase after the other
        apart = target.measure(tiny_task, configs)
        serial = target.last_batch
        target.settings.builder.overlap = True
        before = dict(target.stats)
        joined = target.measure(tiny_task, configs)
        times = target.last_batch
        after = dict(target.stats)
    finally:
        target.close()
    for out in (apart, joined):  # in the batch's order; the failed builds are invalid, the others timed
        assert [m.config.index for m in out] == [c.index for c in configs]
        assert [m.outcome for m in out] == [Outcome.BUILD_ERROR if c.index % 3 == 0 else Outcome.OK for c in configs]
        assert all(m.latency_s > 0 for m in out if m.valid)
        assert [m.error for m in out if not m.valid] == [f"build: RuntimeError: injected build failure for config {i}"
                                                          for i in (0, 3)]
    # one after the other: the first timing starts after the last build; nothing overlaps
    assert not serial.overlap and serial.runs[0][0] >= max(serial.build_ends) and serial.overlap_s == 0.0
    # overlapped: the first timing starts before the last build ends; timings never overlap each other
    assert times.overlap and len(times.runs) == 4 and len(times.build_ends) == 6
    assert times.runs[0][0] < max(times.build_ends) - SLOW_BUILD_S / 2
    assert all(a[1] <= b[0] for a, b in zip(times.runs, times.runs[1:]))
    assert times.wall_s < times.compile_s + times.run_s and times.overlap_s > 0
    assert after["overlap_s"] - before["overlap_s"] == pytest.approx(times.overlap_s)
    assert after["build_phase_s"] - before["build_phase_s"] == pytest.approx(times.compile_s)
    assert after["run_phase_s"] - before["run_phase_s"] == pytest.approx(times.run_s)
    split = time_split(after, before)
    assert set(split) == set(TIME_SPLIT) and split["time_upload_s"] == 0.0  # a local device: nothing uploaded
    assert split["time_overlap_s"] == pytest.approx(times.overlap_s)


def test_time_split_adds_up_the_phases_and_counts_retimings_as_protocol():
    before = dict.fromkeys(("build_phase_s", "run_phase_s", "upload_s", "retiming_s", "protocol_s", "check_s",
                            "overlap_s"), 1.0)
    after = {"build_phase_s": 11.0, "run_phase_s": 9.0, "upload_s": 2.0, "retiming_s": 3.0, "protocol_s": 5.0,
             "check_s": 2.0, "overlap_s": 4.0}
    assert time_split(after, before) == {"time_compile_s": 10.0, "time_upload_s": 1.0, "time_run_s": 5.0,
                                         "time_protocol_s": 7.0, "time_overlap_s": 3.0}
