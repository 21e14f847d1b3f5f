"""The end-to-end step's timings, judged one by one and taken together as one result (``e2e.timings``).

A timing (:func:`tunebench.targets.tvm.e2e.timing._time_rounds`) is the calibration kernel, ``e2e.rounds``
interleaved rounds of every row and the calibration kernel again. :func:`judge_timing` gives each row of one
timing its statistics and noise verdict; :func:`pooled` takes the ``k`` kept timings of a step as one result:

- each row's statistics over all its samples of all ``k`` timings; its verdict noisy when it is noisy in any
  timing (:func:`merge_verdicts`: the reasons of each noisy timing, ``in timing i of k`` added when ``k > 1``);
- each speedup the geometric mean of the ``k`` per-timing ratios (each the geometric mean of its rounds'
  ratios of medians) with a Student-t interval over the timings
  (:func:`~tunebench.protocol.stats.timings_ratio_ci`; ``k = 1``: over the rounds of the one timing);
- each speedup's verdict (:func:`~tunebench.protocol.noise.judge_ratio`) judged per timing and merged alike;
- the protocol's signals at their worst over the timings: the largest calibration slowdown, the drift of
  largest magnitude, the most foreign CPU, the highest load average.
"""

from __future__ import annotations

from tunebench.protocol.noise import NoisePolicy, Verdict, judge, judge_ratio
from tunebench.protocol.stats import summarize, timing_ratios, timings_ratio_ci

BASELINES = ("torch", "torch_compile", "torch_tf32", "onnxruntime", "tvm_default")  # speedup_vs_<row> of the tuned model


def judge_timing(timing: dict, policy: NoisePolicy) -> dict:
    """Statistics (ms) and the noise verdict of every row of one timing (the robust CV against
    ``rounds_cv_max``: a row's samples span the interleaved rounds)."""
    policy = policy.for_rounds()
    pre, post = timing["calibration"]
    slowdowns = [c["slowdown"] for c in (pre, post) if c["slowdown"] is not None]
    slowdown = max(slowdowns) if slowdowns else None
    drift = post["median_s"] / pre["median_s"] - 1.0
    rows = {}
    for name, rounds in timing["samples"].items():
        stats = summarize([x for block in rounds for x in block]).scaled(1e3)
        verdict = judge(policy, rcv=stats.rcv, foreign_cpu=timing["foreign_cpu"], slowdown=slowdown, drift=drift,
                        cv=stats.cv)
        rows[name] = {"stats": stats, "verdict": verdict,
                      "round_medians": [summarize(b).median * 1e3 for b in rounds]}  # ms, like stats
    return {"rows": rows, "slowdown": slowdown, "drift": drift, "n_noisy": sum(r["verdict"].noisy for r in rows.values())}


def merge_verdicts(verdicts: list[Verdict]) -> Verdict:
    """One verdict for the ``k`` timings of a row (or a speedup): noisy when any timing is; the reasons of every
    noisy timing (``... in timing i of k`` when ``k > 1``); each signal at its largest magnitude."""
    out = Verdict()
    for i, v in enumerate(verdicts):
        out.noisy = out.noisy or v.noisy
        where = f" in timing {i + 1} of {len(verdicts)}" if len(verdicts) > 1 else ""
        out.reasons.extend(reason + where for reason in v.reasons)
    out.signals.update(worst_signals([v.signals for v in verdicts]))
    return out


def worst_signals(signals: list[dict]) -> dict:
    """Each signal at its largest magnitude over several timings' ``name -> value`` (None: not measured)."""
    out: dict = {}
    for one in signals:
        for name, value in one.items():
            if value is not None and (name not in out or abs(value) > abs(out[name])):
                out[name] = value
    return out


def speedups(timings_rows: list[dict]) -> tuple[dict, dict]:
    """``(baseline -> (geometric mean, ci low, ci high), baseline -> [ratio of each timing])`` of baseline /
    tuned, from each timing's rows (``round_medians``; a row timed in fewer rounds, TVM's default build, is
    paired with the tuned row's first rounds)."""
    out, each = {}, {}
    for base in BASELINES:
        if base not in timings_rows[0]:
            continue
        nums, dens = [], []
        for rows in timings_rows:
            theirs, tuned = rows[base]["round_medians"], rows["tuned"]["round_medians"]
            n = min(len(theirs), len(tuned))
            nums.append(theirs[:n])
            dens.append(tuned[:n])
        out[base] = timings_ratio_ci(nums, dens)
        each[base] = timing_ratios(nums, dens)
    return out, each


def _worst(values, key=lambda v: v):
    known = [v for v in values if v is not None]
    return max(known, key=key) if known else None


def pooled(kept: list[dict], policy: NoisePolicy) -> dict:
    """The ``k`` kept timings (each a :func:`judge_timing` with its timing's ``samples``, ``calibration``,
    ``foreign_cpu``, ``loadavg``) as one result (module docstring): ``{"rows": {row: {"stats", "verdict",
    "round_medians" (all timings' rounds, in order), "timing_round_medians" (per timing)}}, "speedups",
    "timing_speedups", "speedup_verdicts", "calibration" (every timing's pre and post, in order), "slowdown",
    "drift", "foreign_cpu", "loadavg", "timings" (k)}``."""
    rows = {}
    for name in kept[0]["rows"]:
        samples = [x for t in kept for block in t["samples"][name] for x in block]
        per_timing = [t["rows"][name]["round_medians"] for t in kept]
        rows[name] = {"stats": summarize(samples).scaled(1e3),
                      "verdict": merge_verdicts([t["rows"][name]["verdict"] for t in kept]),
                      "round_medians": [m for medians in per_timing for m in medians],
                      "timing_round_medians": per_timing}
    ratios, each = speedups([t["rows"] for t in kept])
    ratio_policy = policy.for_rounds()
    verdicts = {base: merge_verdicts([judge_ratio(ratio_policy, (t["rows"][base]["verdict"], t["rows"]["tuned"]["verdict"]))
                                      for t in kept]) for base in ratios}
    return {"rows": rows, "speedups": ratios, "timing_speedups": each, "speedup_verdicts": verdicts,
            "calibration": tuple(c for t in kept for c in t["calibration"]),
            "slowdown": _worst(t["slowdown"] for t in kept), "drift": _worst((t["drift"] for t in kept), key=abs),
            "foreign_cpu": _worst(t["foreign_cpu"] for t in kept), "loadavg": _worst(t["loadavg"] for t in kept),
            "timings": len(kept)}
