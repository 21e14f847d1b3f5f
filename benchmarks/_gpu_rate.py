"""The ``trial_rate`` part of ``benchmarks/gpu_suite.py``: how many trials per second the harness sustains on
ResNet-18's 3×3 convolutions, and where a trial's time goes.

One tracked run (``run_experiment``, e2e step off) tunes each 3×3 convolution of ResNet-18 (batch 1, 224×224:
four stride-1 and three stride-2 layers) with ``method=random`` (the method's own work is negligible: the rate
is the measurement pipeline's) for at most ``rate_trials`` trials or ``rate_seconds`` of search clock per task,
``rate_batch`` configs per batch, the build pool sized by ``os.cpu_count()`` and, on a GPU, each config timed as
soon as it is built (``target.builder.overlap``'s GPU default). Reported: trials per second of search clock (the
build and run phases, lock waits left out) and of wall time (with the protocol: calibration, re-timing, output
checks), the ``time_*`` split (compile, upload, run, protocol, overlap) per run and per task, and the goal on a
16-core GPU host: >= :data:`GOAL_TRIALS_PER_S` trials per second of search clock.
"""

from __future__ import annotations

import os

GOAL_TRIALS_PER_S = 3.0
SPLIT = ("time_compile_s", "time_upload_s", "time_run_s", "time_protocol_s", "time_overlap_s")
CONV3 = {"kernel": 3, "padding": 1}
#: ResNet-18's distinct 3×3 convolutions at batch 1, 224×224 input (input size given; stride 2 halves it)
RESNET18_3X3 = [{"in_channels": 64, "height": 56, "width": 56, "out_channels": 64, "stride": 1, **CONV3},
                {"in_channels": 64, "height": 56, "width": 56, "out_channels": 128, "stride": 2, **CONV3},
                {"in_channels": 128, "height": 28, "width": 28, "out_channels": 128, "stride": 1, **CONV3},
                {"in_channels": 128, "height": 28, "width": 28, "out_channels": 256, "stride": 2, **CONV3},
                {"in_channels": 256, "height": 14, "width": 14, "out_channels": 256, "stride": 1, **CONV3},
                {"in_channels": 256, "height": 14, "width": 14, "out_channels": 512, "stride": 2, **CONV3},
                {"in_channels": 512, "height": 7, "width": 7, "out_channels": 512, "stride": 1, **CONV3}]


def part_trial_rate(p: dict) -> dict:
    from _gpu_parts import run, run_data
    from _layers import compose

    work = os.path.join(p["work"], "trial_rate")
    os.makedirs(work, exist_ok=True)
    extra = [f"target={p['target']}", f"measure.cache_dir={p['cache_dir']}", *p.get("target_overrides", []),
             f"budget.seconds_per_task={p['rate_seconds']}", f"target.batch_size={p['rate_batch']}",
             *p.get("rate_overrides", [])]
    cfg = compose("random", work, p["rate_trials"], 0, p["rate_layers"], extra)
    run_id, error = run(cfg)
    if run_id is None or error:
        return {"error": error}
    m, _, entries = run_data(cfg, run_id)
    trials = int(m.get("n_measurements", 0))
    search_s, wall_s = m.get("search_time_s") or 0.0, m.get("wall_s") or 0.0
    rate = trials / search_s if search_s > 0 else None
    tasks = [{"task": e["name"], "trials": e.get("trials"), "invalid": e.get("invalid"), "search_s": e.get("search_s"),
              "trials_per_s": e["trials"] / e["search_s"] if e.get("search_s") else None,
              **{k: m.get(f"{e['id']}.{k}") for k in SPLIT}} for e in entries]
    return {"run_id": run_id, "method": "random", "layers": len(p["rate_layers"]), "trials": trials,
            "invalid": m.get("n_invalid"), "trials_per_task": p["rate_trials"], "seconds_per_task": p["rate_seconds"],
            "batch_size": p["rate_batch"], "build_workers": min(os.cpu_count() or 1, p["rate_batch"]),
            "overrides": list(p.get("rate_overrides", [])), "search_time_s": search_s, "wall_s": wall_s,
            "trials_per_s": rate, "trials_per_wall_s": trials / wall_s if wall_s > 0 else None,
            "split": {k: m.get(k) for k in SPLIT}, "harness_overhead_share": m.get("harness_overhead_share"),
            "goal": {"trials_per_s": GOAL_TRIALS_PER_S, "host_cores": 16, "cores_here": os.cpu_count(),
                     "met": None if rate is None else rate >= GOAL_TRIALS_PER_S},
            "tasks": tasks}


def _n(x, fmt: str = ".2f") -> str:
    return format(x, fmt) if isinstance(x, (int, float)) and not isinstance(x, bool) else "—"


def rate_markdown(r: dict) -> list[str]:
    """The part's section of the suite's report: the rate, its goal, and the time split per task."""
    g = r["goal"]
    verdict = "—" if g["met"] is None else ("met" if g["met"] else "not met")
    s = r["split"]
    lines = [f"{r['trials']} trials ({r['invalid']} invalid) on {r['layers']} layers, method {r['method']}, batches of "
             f"{r['batch_size']} built by {r['build_workers']} workers{'; ' + ' '.join(r['overrides']) if r['overrides'] else ''}.",
             "", f"**{_n(r['trials_per_s'])} trials/s** of search clock ({_n(r['trials_per_wall_s'])} per wall second); "
             f"goal ≥ {g['trials_per_s']:g} on a {g['host_cores']}-core GPU host ({g['cores_here']} cores here): {verdict}.",
             "", f"Where the time went (s): compile {_n(s['time_compile_s'], '.1f')}, upload {_n(s['time_upload_s'], '.1f')}, "
             f"run {_n(s['time_run_s'], '.1f')}, protocol {_n(s['time_protocol_s'], '.1f')}; overlap saved "
             f"{_n(s['time_overlap_s'], '.1f')}; wall {_n(r['wall_s'], '.1f')}.", "",
             "| task | trials | trials/s | compile s | run s | protocol s | overlap s |", "|---|---|---|---|---|---|---|"]
    for t in r["tasks"]:
        lines.append(f"| {t['task']} | {t['trials']} | {_n(t['trials_per_s'])} | {_n(t['time_compile_s'], '.1f')} | "
                     f"{_n(t['time_run_s'], '.1f')} | {_n(t['time_protocol_s'], '.1f')} | {_n(t['time_overlap_s'], '.1f')} |")
    return lines
