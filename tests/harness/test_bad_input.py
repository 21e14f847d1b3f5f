"""Bad input, across every config group and the CLI subcommands: exit code 2, exactly one output
line and it starts with ``error:``, the bad value named, and nothing written (no MLflow store, run
or records folder).

Each case runs the real entry point (``run.py`` or ``python -m tunebench``) in a forked child of a
process that has already imported tunebench, TVM and PyTorch, so 70 cases take seconds, not minutes.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import runpy
import sys
import traceback

import pytest

from conftest import ROOT, TINY_LAYER, cuda_available
from tunebench.harness.setup.compose import layers_override

RUN_PY = os.path.join(ROOT, "run.py")
FAST = [layers_override([TINY_LAYER]), "progress=false"]


def _layer(**change) -> str:
    spec = {**TINY_LAYER, **change}
    return layers_override([{k: v for k, v in spec.items() if v is not None}])


FPGA = ["target=table", "model=hls_gemm"]

# (arguments of run.py, text the error line must contain)
RUN_CASES = [
    # config groups and override syntax
    (["method=nope"], "method='nope' is unknown; valid:"),
    (["model=resnet19"], "model='resnet19' is unknown; valid:"),
    (["target=tpu"], "target='tpu' is unknown; valid:"),
    (["budget=huge"], "budget='huge' is unknown; valid:"),
    (["-m", "method=random,nope"], "method='nope' is unknown"),
    (["method=random,autotvm"], "method=random,autotvm is a sweep"),
    (["-m", "seed=0,-1"], "seed=-1"),
    (["seed=[1,2"], "cannot parse the override 'seed=[1,2'"),
    (["budget.trails_per_task=4"], "budget.trails_per_task is unknown"),
    (["method=autotvm", "method.plan_sizee=8"], "method.plan_sizee is unknown"),
    (["target.batchsize=3"], "target.batchsize is unknown"),
    (["target.template=winograd"], "target.template='winograd': is not a template of target llvm; valid: packed, nchw, flex"),
    (["-m", "target=cuda", "target.template=packed"], "target.template='packed': is not a template of target cuda; valid: direct, winograd, flex"),
    (["-m", "target=cuda", "target.tag=nvidia/h100"], "target.tag='nvidia/h100': not a target tag of TVM"),
    (["-m", "target=cuda", "budget.max_static_rejects=-1"], "budget.max_static_rejects=-1"),
    (["e2e.foo=1"], "e2e.foo is unknown"),
    (["measure.noise.cv=0.1"], "measure.noise.cv is unknown"),
    (["tracking.url=x"], "tracking.url is unknown"),
    # budget
    (["budget.trials_per_task=0"], "budget.trials_per_task=0"),
    (["budget.trials_per_task=-3"], "budget.trials_per_task=-3"),
    (["budget.trials_per_task=abc"], "budget.trials_per_task='abc'"),
    (["budget.seconds_per_task=0"], "budget.seconds_per_task=0"),
    (["budget.seconds_per_task=abc"], "budget.seconds_per_task='abc'"),
    (["budget.early_stopping=0"], "budget.early_stopping=0"),
    (["budget=quick", "budget.method_overrides=5"], "budget.method_overrides=5"),
    # method
    (["method=autotvm", "method.plan_size=0"], "method.plan_size=0"),
    (["method=autotvm", "method.eps_greedy=2"], "method.eps_greedy=2"),
    (["method=autotvm", "method.loss_type=foo"], "method.loss_type='foo'"),
    (["method=autotvm", "method.sa_n_iter=abc"], "method.sa_n_iter='abc'"),
    (["method=dgp", "method.tuning_set=foo"], "method.tuning_set='foo'"),
    (["method=gat", "method.variant=foo"], "method.variant='foo'"),
    (["method=gat", "method.pretrained=/nonexistent/gat.pt"], "method.pretrained=/nonexistent/gat.pt"),
    (["method=gat", "method.pretrained=/etc/passwd"], "method.pretrained=/etc/passwd: not a checkpoint of"),
    (["method=gat", "method.pretrained=/tmp"], "method.pretrained=/tmp: not a regular file"),
    (["method=glimpse", "method.pretrained=/nonexistent/g.pt"], "method.pretrained=/nonexistent/g.pt: no such file"),
    (["method=glimpse", "method.pretrained=/etc/passwd"], "method.pretrained=/etc/passwd: not a model of"),
    (["method=glimpse", "method.blueprint=foo"], "method.blueprint='foo'"),
    (["method=glimpse", "method.tau=2"], "method.tau=2"),
    (["method=cgp", "method.model=bogus", *FPGA], "method.model='bogus'"),
    (["method=cgp", "method.free_fidelity_ratio=2", *FPGA], "method.free_fidelity_ratio=2"),
    (["method=cgp", "method.free_fidelity_ratio=abc", *FPGA], "method.free_fidelity_ratio='abc'"),
    (["method=dcgp", "method.final_beta=-1", *FPGA], "method.final_beta=-1"),
    (["method=cgp"], "method=cgp cannot run on target=llvm"),
    # a budget too small for a method's first phase (known once the task's space is built)
    (["method=cgp", *FPGA, "budget.trials_per_task=48"],
     "budget.trials_per_task=48: method=cgp needs at least 232 trials per task on task gemm"),
    (["method=dcgp", "target=table", "model=hls_spmv", "budget.trials_per_task=100"], "method=dcgp needs at least"),
    (["method=dac19", "target=table", "model=hls_conv"], "budget.trials_per_task=16: method=dac19 needs at least 90"),
    (["method=ann", *FPGA, "budget.trials_per_task=47"], "method=ann needs at least 48"),
    (["method=ann"], "method=ann cannot run on target=llvm"),
    (["method=dac19"], "method=dac19 cannot run on target=llvm"),
    (["method=bt", "method.n_init=4"], "method=bt cannot run on target=llvm"),
    (["method=flextensor", "method.policy=x"], "method.policy='x': valid: q, p"),
    (["method=flextensor", "method.n_starts=0"], "method.n_starts=0"),
    # model
    ([*FAST[1:], "model.layers=[]"], "model.layers=[]"),
    (["model=ops", "model.operators=[c4d]"], "model.operators: unknown operator 'c4d'; valid: gmv"),
    (["model=ops", "model.operators=[]"], "model.operators=[]"),
    (["model=ops", "model.cases=[16]"], "model.cases: case 16 of c2d: c2d has cases 1..15"),
    (["model=ops", "model.operators=[t2d]", "model.cases=[1]"], "task t2d_1: no packed template for 't2d'"),
    ([_layer(in_channels=-1)], "model.layers[0].in_channels=-1"),
    ([_layer(out_channels=0)], "model.layers[0].out_channels=0"),
    ([_layer(kernel=31)], "model.layers[0].kernel=31"),
    ([_layer(height=None)], "model.layers[0] misses height"),
    ([_layer(in_channels="abc")], "model.layers[0].in_channels='abc'"),
    ([_layer(groups=3)], "model.layers[0].groups=3"),
    ([_layer(dilation=2)], "model.layers[0].dilation is unknown"),
    ([_layer(stride=0)], "model.layers[0].stride=0"),
    ([_layer(padding=-1)], "model.layers[0].padding=-1"),
    (["model.layers=5"], "model.layers=5"),
    (["model=resnet18", "model.seed=-1"], "model.seed=-1"),
    (["model=hls_gemm"], "model=hls_gemm and target=llvm do not go together"),
    (["target=table"], "model=layers and target=table do not go together"),
    (["target=table", "model=machsuite_gemmm"], "model='machsuite_gemmm' is unknown; valid:"),
    (["model=spector_mm"], "model=spector_mm and target=llvm do not go together"),
    (["target=table", "model=spector_mm", "model.kernel=spector_mmm"],
     "model.kernel='spector_mmm' is not a recorded design space; valid: machsuite_aes, "),
    (["target=table", "model=spector_mm", "target.fidelities=[synth,impl]"],
     "target.fidelities=['synth', 'impl']: spector_mm has no fidelity 'synth'; valid: estimate, impl"),
    (["target=table", "model=machsuite_gemm", "target.objectives=[delay_s,power_w]"],
     "machsuite_gemm records no 'power_w' at estimate; valid there:"),
    # target
    (["target.batch_size=0"], "target.batch_size=0"),
    (["target.batch_size=abc"], "target.batch_size='abc'"),
    (["target.mcpu=skylakee"], "target.mcpu='skylakee' is not an LLVM CPU"),
    (["target.mcpu=pentium4"], "target.mcpu='pentium4' is not an LLVM CPU for x86_64"),
    (["target.num_cores=0"], "target.num_cores=0"),
    (["target.runner.repeat=0"], "target.runner.repeat=0"),
    (["target.runner.statistic=max"], "target.runner.statistic='max'"),
    (["target.runner.timeout_s=-1"], "target.runner.timeout_s=-1"),
    (["target.builder.timeout_s=0"], "target.builder.timeout_s=0"),
    (["target.check.tolerance=0"], "target.check.tolerance=0"),
    (["target.handler=nocolon"], "target.handler='nocolon'"),
    ([*FPGA, "target.fidelities=[]"], "target.fidelities=[]"),
    ([*FPGA, "target.table=/nonexistent/t.csv"], "target.table='/nonexistent/t.csv' does not exist"),
    # graphs and their schedules (target=memory)
    (["target=memory", "model=darts_v2", "method=serenity", "target.capacity_bytes=1000"],
     "target.capacity_bytes=1000: below the largest tensor of darts_v2_normal (602112 B)"),
    (["target=memory", "model=darts_v2", "method=random"], "method=random cannot run on target=memory"),
    (["method=serenity"], "method=serenity cannot run on target=llvm"),
    (["target=memory"], "model=layers and target=memory do not go together"),
    (["target=memory", "model=randwire_cifar10", "model.stages=[1,3]", "method=kahn"], "model.stages=[1, 3]"),
    (["target=memory", "model=darts_v2", "method=serenity", "method.rewrite=[winograd]"], "method.rewrite="),
    (["target=memory", "model=darts_v2", "method=hmcos", "method.max_iterations=0"], "method.max_iterations=0"),
    (["target=memory", "model=darts_v2", "method=hmcos", "method.accounting=tflite"], "method.accounting='tflite'"),
    (["target=memory", "model=darts_v2", "method=hmcos", "method.time_limit_s=-1"], "method.time_limit_s=-1"),
    (["target=memory", "model=darts_v2", "method=hmcos", "method.cell_ops=[' ']"], "method.cell_ops="),
    (["target=memory", "model=darts_v2", "method=kahn", "target.accounting=arena"], "target.accounting='arena'"),
    (["target=memory", "model=darts_v2", "method=serenity", "method.front_end=tvm"], "method.front_end='tvm'"),
    (["target=memory", "model=darts_v2", "method=serenity", "method.window_groups=0"], "method.window_groups=0"),
    (["target=memory", "model=darts_v2", "method=serenity", "method.front_end_share=1.5"],
     "method.front_end_share=1.5"),
    (["target=memory", "model=darts_v2", "method=serenity", "method.window_max_nodes=1"],
     "method.window_max_nodes=1"),
    (["target=memory", "model=darts_v2", "method=brute_force"],
     "method.max_nodes=12: graph darts_v2_normal has 20 nodes"),
    (["target=memory", "model=hmcos_darts_imagenet", "method=brute_force", "method.max_nodes=16"],
     "method.max_nodes=16: graph hmcos_darts_imagenet has 584 nodes"),
    # e2e and measure
    (["e2e.rounds=0"], "e2e.rounds=0"),
    (["e2e.timings=0"], "e2e.timings=0"),
    (["e2e.timings=101"], "e2e.timings=101"),
    (["e2e.default_n_runs=-1"], "e2e.default_n_runs=-1"),
    (["e2e.tolerance=-1"], "e2e.tolerance=-1"),
    (["e2e.enabled=maybe"], "e2e.enabled='maybe'"),
    (["measure.noise.cv_max=-1"], "cv_max"),
    (["measure.retime.top_k=0"], "top_k"),
    (["measure.cache_dir=/tmp"], "choose a private folder, one only you can write"),  # /tmp: never "chmod"
    # top level: seed, paths, tracking, resume
    (["seed=-1"], "seed=-1"),
    (["seed=abc"], "seed='abc'"),
    (["tracking.uri=http://127.0.0.1:9"], "tracking.uri=http://127.0.0.1:9: MLflow server unreachable"),
    (["tracking.uri=ftp://x"], "tracking.uri=ftp://x: unsupported scheme"),
    (["tracking.outage_wait_s=-1"], "tracking.outage_wait_s=-1"),
    (["records_dir=/proc/tunebench"], "records_dir=/proc/tunebench"),
    (["workdir=/nonexistent/dir"], "workdir=/nonexistent/dir"),
    (["check_correctness=maybe"], "check_correctness='maybe'"),
    (["progress=2"], "progress=2"),
    (["resume=0123456789abcdef0123456789abcdef"], "resume=0123456789abcdef0123456789abcdef: no such run"),
    # keys added with +, numbers too long to read, a launcher that is not installed, sizes beyond bounds
    (["+budget.trial_limit=8"], "budget.trial_limit is unknown: budget has no key 'trial_limit'"),
    (["+sed=1"], "sed is unknown: the config has no key 'sed'"),
    (["method=autotvm", "+method.plan=8"], "method.plan is unknown"),
    (["+target.runner.repeats=2"], "target.runner.repeats is unknown"),
    (["seed=" + "7" * 4400], "cannot parse the override 'seed=777"),
    (["-m", "hydra/launcher=rayy", "seed=0,1"], "hydra/launcher='rayy' is unknown; valid: basic, joblib, tunebench_ray"),
    (["budget.trials_per_task=5000000000"], "budget.trials_per_task=5000000000: must be an integer in [1, 1000000]"),
    (["e2e.n_runs=123456789"], "e2e.n_runs=123456789"),
    (["measure.retime.top_k=4096"], "measure.retime.top_k=4096"),
    ([_layer(in_channels=4096, out_channels=65536, height=2048, width=2048)], "model.layers[0]: its input, weights"),
    (["progress=false", "model.layers=[{in_features:300000,out_features:300000}]"], "model.layers[0]: its input"),
    # target=accel: impossible architectures, a layer its array cannot map, methods that need its mapspace
    (["target=accel", "target.scratchpad_kib=0.1"], "target.scratchpad_kib=0.1: too small for one tile"),
    (["target=accel", "target.array_rows=0"], "target.array_rows=0: must be a positive integer"),
    (["target=accel", "target.accumulator_kib=0"], "target.accumulator_kib=0.0: must be a positive number"),
    (["target=accel", "target.objectives=[joules]"], "target.objectives=['joules']"),
    (["target=accel", _layer(groups=4)], "groups=4 cannot be mapped on target=accel"),
    (["method=mapspace_bo"], "method=mapspace_bo cannot run on target=llvm"),
    (["method=loma", "target=accel", "target.objectives=[energy_pj_per_mac,edp]"], "method=loma cannot run"),
    (["method=mapspace_bo", "target=accel", "method.order_encoding=sorted"], "method.order_encoding='sorted'"),
    (["method=mapspace_bo", "target=accel", "method.transfer_from=[{scratchpad:64}]"],
     "method.transfer_from[0]={'scratchpad': 64}: must change knobs of target=accel"),
    # non-finite numbers: refused for every knob, nested ones included, before any check of its own
    (["target=accel", "target.accumulator_kib=inf"], "target.accumulator_kib=inf: must be finite"),
    (["target=accel", "target.clock_hz=inf"], "target.clock_hz=inf: must be finite"),
    (["target=accel", "target.dram_pj_per_bit=nan"], "target.dram_pj_per_bit=nan: must be finite"),
    (["method=mapspace_bo", "target=accel", "method.transfer_from=[{scratchpad_kib:inf}]"],
     "method.transfer_from=[{'scratchpad_kib': inf}]: must be finite"),
    (["method=cgp", *FPGA, "method.free_fidelity_ratio=nan"], "method.free_fidelity_ratio=nan: must be finite"),
    (["e2e.tolerance=inf"], "e2e.tolerance=inf: must be finite"),
    # multi-objective samplers on a one-objective target; a Blueprint mode without a model
    (["method=nsga2"], "method=nsga2 cannot run on target=llvm: it needs several objectives"),
    (["method=motpe", "target=replay", "model=measured"], "method=motpe cannot run on target=replay"),
    (["method=glimpse", "method.blueprint=constant"], "method.blueprint=constant needs method.pretrained"),
    # sizes bounded by what the machine can do
    (["method=mapspace_bo", "target=accel", "method.n_candidates=100000000"],
     "method.n_candidates=100000000: must be an integer in [1, 65536]"),
    (["method=loma", "target=accel", "method.lpf_limit=12"], "method.lpf_limit=12: must be an integer in [1, 8]"),
    (["method=timeloop_random", "target=accel", "method.max_permutations_per_if_visit=0"],
     "method.max_permutations_per_if_visit=0: must be a positive integer"),
    (["method=timeloop_random", "target=accel", "method.victory_condition=-1"], "method.victory_condition=-1"),
    (["method=timeloop_random"], "method=timeloop_random cannot run on target=llvm"),
    # model=dosa_firesim: DOSA's recorded mappings on target=accel
    (["model=dosa_firesim"], "model=dosa_firesim and target=llvm do not go together"),
    (["model=dosa_firesim", "target=accel", "method=mapspace_bo"], "model=dosa_firesim's tasks are recorded mappings"),
    (["model=dosa_firesim", "target=accel", "method=loma"], "method=loma cannot run on target=accel"),
    (["model=dosa_firesim", "target=accel", "method=salsa"], "method=salsa cannot run on target=accel"),
    (["model=dosa_firesim", "target=accel", "method=nsga2"], "it needs several objectives (the target has latency_s)"),
    (["model=dosa_firesim", "target=accel", "target.objectives=[latency_s,energy_pj_per_mac]"],
     "model=dosa_firesim has FireSim's cycles only (no energy was measured); valid: ['latency_s']"),
    (["model=dosa_firesim", "target=accel", "model.layers=[72]"], "model.layers: 72 is no DOSA layer; valid: 1..71"),
    (["model=dosa_firesim", "target=accel", "model.layers=[29]"], "unrolls K by 10; target=accel unrolls 16: no mapping"),
    (["model=dosa_firesim", "target=accel", "model.layers=[0]"], "model.layers=[0]: must be a list of distinct positive"),
]

CLI_CASES = [
    (["glimpse", "train", "--out", "g.pt"], "glimpse train: nothing to train on"),
    (["glimpse", "train", "--records", "/nonexistent", "--out", "g.pt"], "--records /nonexistent: no such run"),
    (["glimpse", "train", "--prior-epochs", "0", "--out", "g.pt"], "--prior-epochs: '0': a positive number of epochs, or auto"),
    ([], "no command given; valid:"),
    (["nope"], "unknown command 'nope'"),
    (["leaderboard", "--bogus"], "--bogus"),
    (["leaderboard", "--since", "yesterday"], "yesterday"),
    (["leaderboard", "--tracking-uri", "ftp://x"], "ftp://x"),
    (["dataset", "build", "--records", "/nonexistent/records", "--out", "set.pt"], "/nonexistent/records"),
    (["gat", "train", "--dataset", "/nonexistent/set.pt", "--out", "m.pt"], "/nonexistent/set.pt"),
    (["knobs", "--out", "/dev/null/knobs.md"], "--out=/dev/null/knobs.md: cannot be written (/dev/null is not"),
    (["glimpse", "train", "--gpu-static-tags", "2", "--out", "/dev/null/g.pt"], "--out=/dev/null/g.pt: cannot be"),
    (["gat", "train", "--dataset", "set.pt", "--out", "."], "--out=.: is a folder"),
    (["suite", "gpus"], "set 'gpus' is unknown; valid: cpu, gpu, all"),
    (["suite", "gpu", "--seeds", "0"], "--seeds=0: must be a whole number >= 1"),
    (["suite", "gpu", "--methods", "random,nope"], "method='nope' is unknown"),
    (["suite", "gpu", "--budget", "5000"], "--budget=5000: larger than space convolution_MI50 (2442 configs)"),
    (["glimpse", "train", "--seed", "-1", "--out", "g.pt"], "--seed: '-1': must be an integer in [0, 4294967295]"),
    (["glimpse", "train", "--dims", "-3", "--out", "g.pt"], "--dims: '-3': must be an integer in [1, 64]"),
    (["glimpse", "train", "--dims", "0", "--out", "g.pt"], "--dims: '0': must be an integer in [1, 64]"),
    (["glimpse", "train", "--acq-batches", "x", "--out", "g.pt"], "--acq-batches: 'x': must be an integer"),
    (["gat", "train", "--dataset", "set.pt", "--out", "m.pt", "--lr", "nan"], "--lr: 'nan': must be a number in"),
    (["gat", "train", "--dataset", "set.pt", "--out", "m.pt", "--epochs", "0"], "--epochs: '0': must be an integer"),
]


def _child(entry: str, argv: list[str], cwd: str, out_path: str) -> None:
    fd = os.open(out_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    sys.stdout = open(1, "w", closefd=False)
    sys.stderr = open(2, "w", closefd=False)
    os.chdir(cwd)
    code = 0
    try:
        if entry == "run":
            sys.argv = [RUN_PY, *argv]
            runpy.run_path(RUN_PY, run_name="__main__")
        else:
            from tunebench.__main__ import main

            main(argv)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:
        traceback.print_exc()
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


@pytest.fixture(scope="module", autouse=True)
def _preimport():
    """Import the heavy modules once; every forked case starts with them loaded."""
    import mlflow.tracking  # noqa: F401

    import tunebench.harness.experiment
    import tunebench.harness.setup.preflight
    import tunebench.targets.tvm.target  # noqa: F401


def _run(entry: str, argv: list[str], cwd) -> tuple[int, list[str]]:
    out = os.path.join(cwd, ".output")
    proc = mp.get_context("fork").Process(target=_child, args=(entry, argv, str(cwd), out))
    proc.start()
    proc.join(300)
    assert proc.exitcode is not None, f"{argv} did not finish in 300 s"
    with open(out) as fh:
        lines = [ln for ln in fh.read().splitlines() if ln.strip()]
    os.remove(out)
    return proc.exitcode, lines


def _assert_one_error_line(code: int, lines: list[str], needle: str, argv) -> None:
    assert code == 2, (argv, code, lines[-20:])
    assert len(lines) == 1 and lines[0].startswith("error: "), (argv, lines[-20:])
    assert needle in lines[0], (argv, lines[0])


def _assert_nothing_written(workdir) -> None:
    left = sorted(p for p in os.listdir(workdir) if p != "outputs")  # outputs/: Hydra's own log folder
    assert left == [], f"bad input left {left} in the work dir"


def test_method_needs_are_checked_against_the_target():
    from tunebench.methods import METHODS
    from tunebench.targets import TARGETS

    info = {kind: cls.nominal_info() for kind, cls in TARGETS.items()}  # computed from the registered targets
    assert METHODS["metaschedule"].needs.problems(info["table"])  # schedules need TVM
    assert not METHODS["metaschedule"].needs.problems(info["llvm"])
    assert METHODS["cgp"].needs.problems(info["cuda"]) and not METHODS["cgp"].needs.problems(info["vivado"])
    knob_targets = [t for t in info if not info[t].graph_schedules]  # target=memory's tasks are graphs to order
    assert all(not METHODS[m].needs.problems(info[t]) for m in ("random", "exhaustive") for t in knob_targets)
    assert METHODS["random"].needs.problems(info["memory"]) and METHODS["serenity"].needs.problems(info["llvm"])
    assert not METHODS["serenity"].needs.problems(info["memory"])


def test_enough_distinct_cases():
    assert len({tuple(a) for a, _ in RUN_CASES}) + len({tuple(a) for a, _ in CLI_CASES}) >= 60


@pytest.mark.parametrize("argv,needle", RUN_CASES, ids=[" ".join(a)[-60:] for a, _ in RUN_CASES])
def test_run_py_bad_input(tmp_path, argv, needle):
    own_model = any(a.startswith(("model.layers", "model=")) for a in argv)
    full = ["progress=false", *argv] if own_model else [*FAST, *argv]
    code, lines = _run("run", full, tmp_path)
    _assert_one_error_line(code, lines, needle, argv)
    _assert_nothing_written(tmp_path)


@pytest.mark.parametrize("argv,needle", CLI_CASES, ids=[" ".join(a) or "(none)" for a, _ in CLI_CASES])
def test_cli_bad_input(tmp_path, argv, needle):
    code, lines = _run("cli", argv, tmp_path)
    _assert_one_error_line(code, lines, needle, argv)
    _assert_nothing_written(tmp_path)


@pytest.mark.skipif(cuda_available(), reason="a GPU is present: target=cuda is valid here")
def test_cuda_without_gpu_is_one_line(tmp_path):
    code, lines = _run("run", [*FAST, "target=cuda"], tmp_path)
    _assert_one_error_line(code, lines, "target=cuda: no CUDA GPU found", ["target=cuda"])
    _assert_nothing_written(tmp_path)


def _bad_checkpoints(folder) -> dict[str, str]:
    """Files that are no pretrained model of ``method=gat`` (its defaults) -> the text its error names."""
    import torch

    from tunebench.methods.tensor_programs.gat.dataset import DATASET_FORMAT
    from tunebench.methods.tensor_programs.gat.model import GATCostModel, save_tensor_file

    (folder / "empty.pt").write_bytes(b"")
    (folder / "text.pt").write_text("not a checkpoint\n")
    torch.save({"weights": torch.zeros(3)}, str(folder / "plain.pt"))  # a torch file of another kind
    save_tensor_file(str(folder / "dataset.pt"), DATASET_FORMAT, {}, {"stats": torch.zeros(1)})
    GATCostModel(variant="mhsa", epochs=1).save(str(folder / "mhsa.pt"))  # another network than the config's
    (folder / "folder.pt").mkdir()
    return {"empty.pt": "not a checkpoint of", "text.pt": "not a checkpoint of", "plain.pt": "not a checkpoint of",
            "dataset.pt": "not a checkpoint of", "mhsa.pt": "give method.variant=mhsa", "folder.pt": "not a regular file"}


def test_bad_gat_checkpoints_are_refused_in_the_preflight(tmp_path_factory):
    """Any file that is no checkpoint of ``gat train`` for the config's network is one line, before
    MetaSchedule is imported and before the run exists."""
    folder = tmp_path_factory.mktemp("checkpoints")
    for name, needle in _bad_checkpoints(folder).items():
        workdir = tmp_path_factory.mktemp("run")
        argv = [*FAST, "method=gat", f"method.pretrained={folder / name}"]
        code, lines = _run("run", argv, workdir)
        _assert_one_error_line(code, lines, f"method.pretrained={folder / name}: ", argv)
        assert needle in lines[0], lines[0]
        _assert_nothing_written(workdir)


def test_a_bad_gat_checkpoint_is_refused_within_seconds(tmp_path):
    """The real command line, started cold: refused in seconds (MetaSchedule, ~40-90 s to import, is
    never imported), no MLflow run, records folder or store."""
    import subprocess
    import time

    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, RUN_PY, *FAST, "method=gat", "method.pretrained=/etc/passwd"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    wall = time.monotonic() - t0
    lines = [ln for ln in (proc.stdout + proc.stderr).splitlines() if ln.strip()]
    _assert_one_error_line(proc.returncode, lines, "method.pretrained=/etc/passwd: not a checkpoint", "gat")
    _assert_nothing_written(tmp_path)
    assert wall < 15, f"refused after {wall:.0f} s"


def _measured_files(folder) -> dict[str, str]:
    """Measured files a user could have edited -> the text the error names (file, line or entry, field)."""
    import gzip
    import json

    from tunebench.resources import data_dir

    with open(data_dir("spaces/llvm_dense_1x512x1000.jsonl")) as fh:
        items = [json.loads(line) for line in fh][:4]
    items[0]["configs"] = 3

    def space_file(name, edit):
        copy = json.loads(json.dumps(items))
        edit(copy)
        (folder / name).write_text("".join(json.dumps(i) + "\n" for i in copy))

    space_file("negative.jsonl", lambda c: c[2].update(latency_s=-1.0))
    space_file("nan.jsonl", lambda c: c[3].update(build_s=float("nan")))
    space_file("text.jsonl", lambda c: c[1].update(run_s="fast"))
    space_file("none.jsonl", lambda c: c[:] and (c.__delitem__(slice(1, None)), c[0].update(configs=0)))
    cache = json.loads(gzip.decompress(open(data_dir("kernel_tuner/convolution_MI50.json.gz"), "rb").read()))
    cache["cache"] = dict(list(cache["cache"].items())[:3])
    first = next(iter(cache["cache"]))
    cache["cache"][first]["time"] = -1000.0
    (folder / "negative.json").write_text(json.dumps(cache))
    cache["cache"][first]["time"] = 1.0
    cache["tune_params_keys"].remove("use_padding")
    del cache["tune_params"]["use_padding"]
    (folder / "undeclared.json").write_text(json.dumps(cache))
    return {"negative.jsonl": ":3: latency_s=-1.0: must be a finite number > 0",
            "nan.jsonl": ":4: build_s=nan: must be a finite number >= 0",
            "text.jsonl": ":2: run_s='fast': must be a finite number >= 0",
            "none.jsonl": ":1: header configs=0: must be a positive integer",
            "negative.json": f"cache entry '{first}': time=-1000.0: must be a finite number > 0",
            "undeclared.json": f"cache entry '{first}': the key is not the values of tune_params_keys"}


def test_impossible_measured_files_are_refused_before_the_run(tmp_path_factory):
    """A replayed file with a negative, NaN or textual number, no configs, or an entry with a parameter
    the cache does not declare: one line naming file, line (or entry) and field; no run, no records."""
    folder = tmp_path_factory.mktemp("measured")
    for name, needle in _measured_files(folder).items():
        workdir = tmp_path_factory.mktemp("run")
        argv = ["progress=false", "target=replay", "model=measured", f"model.path={folder / name}"]
        code, lines = _run("run", argv, workdir)
        _assert_one_error_line(code, lines, f"model.path={folder / name}", argv)
        assert needle in lines[0], lines[0]
        _assert_nothing_written(workdir)


def test_an_edited_or_missing_recorded_table_is_one_line(tmp_path_factory, monkeypatch):
    """A recorded FPGA table whose sha256 is not the manifest's, or that is gone, is refused before the run
    (the forked child sees the copy the parent points the data folder at)."""
    import shutil

    from tunebench.datasets import fpga_recorded

    copy = tmp_path_factory.mktemp("data") / "fpga_recorded"
    shutil.copytree(fpga_recorded.ROOT, copy)
    monkeypatch.setattr(fpga_recorded, "ROOT", str(copy))
    fpga_recorded._read.cache_clear()
    table = copy / "spector" / "dct.csv.gz"
    raw = table.read_bytes()
    table.write_bytes(raw[:100] + bytes([raw[100] ^ 1]) + raw[101:])
    argv = ["progress=false", "target=table", "model=spector_dct"]
    for needle in ("spector_dct was changed: sha256", "spector_dct is missing"):
        workdir = tmp_path_factory.mktemp("run")
        code, lines = _run("run", argv, workdir)
        _assert_one_error_line(code, lines, needle, argv)
        _assert_nothing_written(workdir)
        table.unlink(missing_ok=True)
    fpga_recorded._read.cache_clear()


IMPORT_NETS = '''
import torch
import torch.nn as nn


class Raises(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)

    def forward(self, x):
        raise ValueError("no weights loaded")


class NoForward(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)


class Branch(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)

    def forward(self, x):
        y = self.conv(x)
        return y if y.sum() > 0 else -y


class Determinant(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)

    def forward(self, x):
        return torch.linalg.det(self.conv(x))


def raises():
    return Raises()


def determinant():
    return Determinant()


def no_forward():
    return NoForward()


def branch():
    return Branch()


def conv():
    return nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU())


def upsample():
    return nn.Sequential(nn.Conv2d(3, 4, 3), nn.Upsample(scale_factor=10000))
'''


def _import_failures(folder) -> list[tuple[list[str], str]]:
    """Models that pass every static check and fail only when imported -> the text their line names."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    def onnx_file(name, nodes, x, y, weights=()):
        graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x)],
                                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, y)], list(weights))
        onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), str(folder / name))
        return f"model.path={folder / name}"

    weight = numpy_helper.from_array(np.zeros((4, 5, 3, 3), np.float32), "w")  # 5 input channels for 3
    conv = onnx_file("conv.onnx", [helper.make_node("Conv", ["x", "w"], ["y"])], [1, 3, 8, 8], [1, 4, 6, 6], [weight])
    huge = onnx_file("huge.onnx", [helper.make_node("Relu", ["x"], ["y"])], [200000, 200000], [200000, 200000])
    shape = numpy_helper.from_array(np.array([1000000, 100000], np.int64), "s")  # a small input made 400 GB
    expand = onnx_file("expand.onnx", [helper.make_node("Expand", ["x", "s"], ["y"])], [1, 100000],
                       [1000000, 100000], [shape])
    torch_model = ["model=torch", "model.input_shape=[1,3,8,8]"]
    return [
        (["model=onnx", conv], f"{conv}: trial run (ONNX Runtime) on the input shapes failed: "),
        (["model=onnx", huge], f"{huge}: its inputs: 160 GB; at most"),
        (["model=onnx", expand], f"{expand}: its weights, inputs, outputs and activations: 400 GB; at most"),
        ([*torch_model, "model.factory=import_nets:raises"], "model.factory=import_nets:raises: torch.export "
         "(a trial forward on fake tensors of shape [1, 3, 8, 8]) failed: ValueError: no weights loaded"),
        ([*torch_model, "model.factory=import_nets:no_forward"], 'NotImplementedError: Module [NoForward] is '
         'missing the required "forward" function'),
        ([*torch_model, "model.factory=import_nets:branch"], "failed: GuardOnDataDependentSymNode: Could not "
         "guard on data-dependent expression"),
        (["model=torch", "model.input_shape=[1,4,8,8]", "model.factory=import_nets:conv"],
         "model.factory=import_nets:conv: torch.export (a trial forward on fake tensors of shape [1, 4, 8, 8]) "
         "failed: RuntimeError: Given groups=1, weight of size [4, 3, 3, 3], expected input[1, 4, 8, 8]"),
        ([*torch_model, "model.factory=import_nets:determinant"], "model.factory=import_nets:determinant: Relax "
         "import (from_exported_program) failed: AssertionError: Unsupported function types ['_linalg_det.default']"),
        (["model=torch", "model.input_shape=[]", "model.factory=import_nets:conv"],
         "model.input_shape=[]: must be a non-empty list"),
        (["model=torch", "model.input_shape=[65536,65536,65536]", "model.factory=import_nets:conv"],
         "its input of model.input_shape=[65536, 65536, 65536]: 1.13e+06 GB; at most"),
        (["model=torch", "model.input_shape=[1,3,32,32]", "model.factory=import_nets:upsample"],
         "model.factory=import_nets:upsample: the tensors its forward makes: 1.44e+03 GB; at most"),
        ([*torch_model, "model.factory=import_nets:conv", "target=accel"], "model=torch cannot run on target=accel"),
        (["model=onnx", f"model.path={folder / 'conv.onnx'}", "target=accel"], "model=onnx cannot run on target=accel"),
    ]


def test_models_that_fail_only_when_imported_are_one_line(tmp_path_factory, monkeypatch):
    """Every stage of a user's model's import runs in the preflight (ONNX: shape inference, size, constant
    folding, a trial run, Relax import; PyTorch: input size, torch.export, size of what it traced, a trial
    forward, Relax import (an operator TVM's frontend does not convert); then fusion and task extraction): a failure is one line naming the model, the
    stage and the first cause; a model whose tensors exceed the machine's memory is refused before they are
    allocated; no run, no records. (The forked child imports the nets from the folder put on sys.path.)"""
    folder = tmp_path_factory.mktemp("models")
    (folder / "import_nets.py").write_text(IMPORT_NETS)
    monkeypatch.syspath_prepend(str(folder))
    for argv, needle in _import_failures(folder):
        workdir = tmp_path_factory.mktemp("run")
        code, lines = _run("run", ["progress=false", *argv], workdir)
        _assert_one_error_line(code, lines, needle, argv)
        _assert_nothing_written(workdir)


def test_newer_paths_bad_input_is_one_line(tmp_path_factory, monkeypatch):
    """One case per class of the newer paths: check-method on an abstract class, a search-path YAML with
    a tab and one shadowing a built-in option, space measure into a file: one line, exit 2, nothing written."""
    folder = tmp_path_factory.mktemp("user")
    (folder / "user_methods.py").write_text("from tunebench.methods.base import Method\n\n\nclass Half(Method):\n"
                                            "    pass\n")
    monkeypatch.syspath_prepend(str(folder))
    for group, name, text in (("tabbed", "mine", "name: mine\n\tcls: x\n"), ("shadow", "random", "name: random\n")):
        os.makedirs(folder / group / "method")
        (folder / group / "method" / f"{name}.yaml").write_text(text)
    (folder / "afile").write_text("x")
    cases = [("cli", ["check-method", "user_methods:Half"], "Half is abstract: it does not define ask"),
             ("run", [f"hydra.searchpath=[file://{folder}/tabbed]", "method=mine"], "mine.yaml:2:1: not valid YAML"),
             ("run", [f"hydra.searchpath=[file://{folder}/shadow]", "method=random"],
              "random.yaml defines method=random, a built-in option"),
             ("cli", ["space", "measure", "--out", str(folder / "afile")], "is a file; give a folder")]
    for entry, argv, needle in cases:
        workdir = tmp_path_factory.mktemp("run")
        code, lines = _run(entry, argv if entry == "cli" else [*FAST, *argv], workdir)
        _assert_one_error_line(code, lines, needle, argv)
        _assert_nothing_written(workdir)
