"""The Markdown report of ``benchmarks/gpu_suite.py``: the parts' status, then one table per part."""

from __future__ import annotations

import math

from _gpu_rate import rate_markdown

PART_TITLES = {"gpu_tests": "GPU tests", "peak": "Measured peak", "trial_rate": "Trials per second, ResNet-18 3×3 convolutions", "resnet18_autotvm": "ResNet-18 end to end, autotvm",
               "resnet18_metaschedule": "ResNet-18 end to end, metaschedule",
               "resnet18_winograd": "ResNet-18 end to end, autotvm, winograd template",
               "vgg16_dense": "VGG-16 dense layers vs PyTorch", "dgp_vs_autotvm": "dgp vs autotvm, VGG-16 conv layers"}
ROW_NAMES = {"e2e": "tuned", "tvm_default": "TVM default build", "torch": "PyTorch FP32",
             "torch_compile": "torch.compile FP32", "torch_tf32": "PyTorch TF32"}


def _num(x, fmt: str = ".4g") -> str:
    return "—" if not isinstance(x, (int, float)) or isinstance(x, bool) or not math.isfinite(x) else format(x, fmt)


def _ci(d: dict | None) -> str:
    """``1.23× [1.10, 1.40]`` (no interval: ``[n/a]``)."""
    if not d or not isinstance(d.get("geomean"), (int, float)):
        return "—"
    lo, hi = d.get("ci_low"), d.get("ci_high")
    ci = f" [{_num(lo, '.2f')}, {_num(hi, '.2f')}]" if isinstance(lo, float) and isinstance(hi, float) else " [n/a]"
    return f"{d['geomean']:.2f}×{ci}"


def _spread(st: dict | None, key: str = "median", unit: str = "ms") -> str:
    """``median (min x, cv y %)`` of a stats dict; ``*`` when noisy."""
    if not st or st.get(key) is None:
        return "—"
    cv = st.get("cv")
    extra = f" (min {_num(st.get('min') if 'min' in st else st.get('min_ms'))}, cv {_num(100 * cv, '.1f')} %)" \
        if isinstance(cv, float) else ""
    return f"{_num(st[key])}{' ' + unit if unit else ''}{extra}{'*' if st.get('noisy') else ''}"


def _fraction(x) -> str:
    return x if isinstance(x, str) else _num(x, ".2f")


def _header(out: dict) -> list[str]:
    d = out["device"]
    dev = f"{d['gpu']} (driver {d['driver']}, {d.get('gpu_memory', '?')})" if d.get("gpu") else \
        f"no GPU: {d.get('cpu')} ({d.get('cores')} cores)"
    return [f"# GPU suite{' (dry run on llvm)' if out['dry_run'] else ''}", "",
            f"{dev}; host {out['host']}; commit {out['git_commit']}; {out['date']}; wall {out['wall_s']:.0f} s "
            f"of a {out['budget_s']:.0f} s budget; load {out['loadavg_before']} → {out['loadavg_after']}.", "",
            *_merged(out), "| part | status | wall s | cap s | note |", "|---|---|---|---|---|"]


def _merged(out: dict) -> list[str]:
    """For a suite joined from several calls (``--merge``): the files, their dates, and earlier attempts."""
    if not out.get("merged_from"):
        return []
    dates = out.get("dates") or [None] * len(out["merged_from"])
    lines = ["Joined from " + ", ".join(f"`{f}` ({d})" for f, d in zip(out["merged_from"], dates)) + "."]
    lines += [f"An earlier attempt at {PART_TITLES.get(s['part'], s['part'])} in `{s['file']}`: {s['status']} after "
              f"{_num(s.get('wall_s'), '.0f')} s{' (' + s['reason'] + ')' if s.get('reason') else ''}; the later one "
              "is reported." for s in out.get("superseded", [])]
    return [" ".join(lines), ""]


def _status_rows(out: dict) -> list[str]:
    rows = []
    for name, p in out["parts"].items():
        note = p.get("reason") or (p.get("result") or {}).get("error") or ""
        rows.append(f"| {PART_TITLES.get(name, name)} | {p['status']} | {_num(p.get('wall_s'), '.0f')} "
                    f"| {_num(p.get('cap_s'), '.0f')} | {note} |")
    return rows


def _tests(r: dict) -> list[str]:
    c = r.get("counts", {})
    return [f"`{r['command']}`: " + (", ".join(f"{v} {k}" for k, v in c.items()) or "no summary line")
            + f" (exit code {r['returncode']})."]


def _peak(r: dict) -> list[str]:
    return [f"{r.get('device')}: FP32 FMA {_num(r['fma_gflops'], '.0f')} GFLOP/s, memory bandwidth "
            f"{_num(r['mem_gbps'], '.0f')} GB/s{' (noisy)' if r.get('noisy') else ''}."]


def _e2e(r: dict) -> list[str]:
    lines = [f"`{r.get('model', '')}`, {r['trials_per_task']} trials per task; run {r['run_id']}; {_num(r.get('n_default_kernels'), '.0f')} "
             f"task(s) took TVM's default kernel." + (f" Error: {r['error']}" if r.get("error") else ""), "",
             "| row | latency (median, min, cv) | tuned speedup over it [95 % CI] |", "|---|---|---|"]
    for row, st in r.get("rows", {}).items():
        lines.append(f"| {ROW_NAMES.get(row, row)} | {_spread(st)} | {_ci(r['speedups'].get(row)) if row != 'e2e' else ''} |")
    lines += ["", "| task | kernel taken | tuned kernel | default kernel | tuned / default speedup [95 % CI] "
              "| static-invalid fraction |", "|---|---|---|---|---|---|"]
    for t in r.get("tasks", []):
        noise = " (within noise)" if t.get("within_noise") else ""
        lines.append(f"| {t['task']} | {t['kernel']}{noise} | {_spread(t.get('tuned_ms'))} | "
                     f"{_spread(t.get('default_ms'))} | {_ci(t.get('speedup_vs_default'))} | "
                     f"{_fraction(t['static_invalid_fraction'])} |")
    return lines


def _dense(r: dict) -> list[str]:
    lines = [f"{r['trials_per_layer']} AutoTVM trials per layer; measured bandwidth {_num(r.get('measured_mem_gbps'), '.0f')} GB/s.",
             "", "| layer | tuned ms | PyTorch ms | speedup vs PyTorch [95 % CI] | tuned GB/s (% measured) "
             "| PyTorch GB/s (% measured) |", "|---|---|---|---|---|---|"]
    for L in r.get("layers", []):
        if "error" in L:
            lines.append(f"| {L['layer']} | {L['error']} | | | | |")
            continue
        t, p = L["tuned"], L["torch"]
        lines.append(f"| {L['layer']} | {_spread(t, 'median_ms', '')} | {_spread(p, 'median_ms', '')} "
                     f"| {_ci(L.get('speedup_vs_torch'))} | {_num(t['gbps'], '.0f')} ({_num(t['pct_of_measured_bw'], '.0f')} %) "
                     f"| {_num(p['gbps'], '.0f')} ({_num(p['pct_of_measured_bw'], '.0f')} %) |")
    return lines


def _dgp(r: dict) -> list[str]:
    methods = r.get("methods", {})
    lines = [f"{r['trials_per_layer']} trials per layer; layers: {'; '.join(r['layers'])}.", "",
             "| method | search s (excl. source) | " + " | ".join(f"layer {i + 1} best ms (min)" for i in range(len(r["layers"])))
             + " |", "|---|---|" + "---|" * len(r["layers"])]
    for name, m in methods.items():
        if "error" in m:
            lines.append(f"| {name} | {m['error']} |" + " |" * len(r["layers"]))
            continue
        cells = [f"{_num(t['best_latency_ms'])} ({_num(t['best_latency_min_ms'])}){'*' if t.get('best_noisy') else ''}"
                 for t in m["tasks"]]
        lines.append(f"| {name} | {_num(m['search_time_s'], '.1f')} ({_num(m.get('search_time_excl_source_s'), '.1f')}) | "
                     + " | ".join(cells) + " |")
    return lines


RENDER = {"gpu_tests": _tests, "peak": _peak, "trial_rate": rate_markdown, "resnet18_autotvm": _e2e, "resnet18_metaschedule": _e2e, "resnet18_winograd": _e2e,
          "vgg16_dense": _dense, "dgp_vs_autotvm": _dgp}


def markdown(out: dict) -> str:
    """The report: header, status of every part, then each finished part's table (``*``: a noisy value)."""
    lines = _header(out) + _status_rows(out)
    for name, p in out["parts"].items():
        r = p.get("result")
        if p["status"] != "done" or not r:
            continue
        lines += ["", f"## {PART_TITLES.get(name, name)}", ""] + RENDER[name](r)
    lines += ["", "`*`: a noisy value (robust CV, other processes' CPU or calibration drift over the thresholds).", ""]
    return "\n".join(lines)
