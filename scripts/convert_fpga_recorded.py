"""Convert the two public FPGA design-space data sets into the table target's CSV form
(docs/USAGE.md §Recorded FPGA design spaces): ``data/fpga_recorded/<set>/<kernel>.csv.gz`` and the
manifest ``data/fpga_recorded/MANIFEST.json`` (sha256 of every file, fidelities and objectives per kernel).

    python scripts/convert_fpga_recorded.py HGBO_GIT_DIR SPECTOR_GIT_DIR

Each argument is a git directory of the repository (``git clone --bare`` or a mirror) at the commit in
:data:`ORIGIN`. Reproducible: the gzip files carry no timestamp, rows keep the sources' order.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import subprocess
import sys
import zipfile

import numpy as np
import pandas as pd
import scipy.io

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "fpga_recorded")
ORIGIN = {"machsuite": ("hzkuang/HGBO-DSE", "d12d17f"), "spector": ("KastnerRG/spector", "a24a9cc")}
MACHSUITE = {"aes": "aes/aes", "bfs": "bfs/bulk", "fft": "fft/strided", "gemm": "gemm/ncubed", "md": "md/knn",
             "nw": "nw/nw", "sort": "sort/radix", "spmv": "spmv/ellpack", "stencil3d": "stencil/stencil3d",
             "viterbi": "viterbi/viterbi"}
SPECTOR = ["bfs_dense", "bfs_sparse", "dct", "fir", "hist", "mergesort", "mm", "normals", "nw", "sobel",
           "spmv_5000", "spmv_500000"]
FAILED = 1e8  # HGBO-DSE's failure sentinel (stencil3d)
#: tool seconds per stage (neither source records them): MachSuite's from [Sun-PhD] Table 3.1, the mean HLS,
#: synthesis and implementation seconds per design of the same kernels on the same part (Vivado 2018.2), the
#: table's average for the kernels it does not list; Spector's are stand-ins (data/fpga_recorded/README.md)
SUN_TABLE_3_1 = {"gemm": (137.75, 1379.67, 1744.61), "sort": (166.66, 917.01, 1206.94),
                 "spmv": (365.91, 1528.81, 1034.79), "stencil3d": (369.10, 2082.25, 969.29)}
SUN_AVERAGE = (763.24, 2069.57, 1746.89)
STANDIN_S = {"machsuite": {k: dict(zip(("estimate", "synth", "impl"), SUN_TABLE_3_1.get(k, SUN_AVERAGE)))
                           for k in ("aes", "bfs", "fft", "gemm", "md", "nw", "sort", "spmv", "stencil3d", "viterbi")},
             "spector": {"estimate": 60.0, "impl": 3600.0}}
STRATIX_V = {"alms": 234720, "brams": 2560, "dsps": 256}  # 5SGXEA7N2F45C2 (Terasic DE5): ALMs, M20K, DSP blocks


def git_show(git_dir: str, path: str) -> bytes:
    return subprocess.run(["git", "--git-dir", git_dir, "show", f"HEAD:{path}"], check=True,
                          capture_output=True).stdout


def flatten(d, prefix=""):
    """Leaf path -> value of a directive JSON; an empty list (directive not set) is ``"-"``."""
    out = {}
    for k, v in d.items():
        key = f"{prefix}.{k}" if prefix else k
        if isinstance(v, dict):
            out.update(flatten(v, key))
        elif isinstance(v, list):
            if not v or all(isinstance(x, str) and "/" in x for x in v):  # loop lists are structure, not knobs
                if not v:
                    out[key] = "-"
                continue
            out[key] = json.dumps(v)
        else:
            out[key] = str(v)
    return out


def knob_name(path: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in path).strip("_").replace("__", "_")


def machsuite_rows(zip_bytes: bytes) -> pd.DataFrame:
    """One row per sample: its flattened directives and its stages' objectives (invalid where failed)."""
    z = zipfile.ZipFile(io.BytesIO(zip_bytes))
    names = {n.rsplit("/", 1)[-1]: n for n in z.namelist()}
    ids = sorted(int(n[4:-5]) for n in names if n.startswith("ppa_") and n.endswith(".json"))
    rows = []
    for i in ids:
        ppa = json.loads(z.read(names[f"ppa_{i}.json"]))
        knobs = flatten(json.loads(z.read(names[f"dir_{i}.json"])))
        # bfs, fft, nw and stencil3d give no worst_latency, only "Latency": 1000 for every sample (a
        # placeholder, not a count): no delay for them
        cycles = ppa["LATENCY"].get("worst_latency")
        row = {"sample": i, **{"k:" + k: v for k, v in knobs.items()}}
        for fid, stage in (("estimate", "HLS"), ("synth", "SYN"), ("impl", "IMPL")):
            s = ppa[stage]
            vals = {"luts": s["LUT"], "ffs": s["FF"], "dsps": s["DSP"], "brams": s["BRAM"]}
            if cycles is not None:
                vals = {"delay_s": float(cycles) * float(s["CP"]) * 1e-9, **vals}
            if fid == "impl":
                vals["power_w"] = s["PWR"]
            raw = [cycles or 0, s["CP"], s["LUT"], s["FF"], s["DSP"], s["BRAM"], s.get("PWR", 0)]
            failed = any(float(x) >= FAILED or float(x) < 0 for x in raw)
            for o, v in vals.items():
                row[f"{fid}.{o}"] = np.nan if failed else float(v)
            row[f"{fid}.valid"] = 0 if failed else 1
            row[f"{fid}.error"] = f"failed at {stage} (the source records {FAILED:g})" if failed else ""
        rows.append(row)
    df = pd.DataFrame(rows)
    for fid in ("synth", "impl"):  # a stage after a failed one failed too
        prev = "estimate" if fid == "synth" else "synth"
        bad = (df[f"{prev}.valid"] == 0) & (df[f"{fid}.valid"] == 1)
        df.loc[bad, f"{fid}.valid"] = 0
        df.loc[bad, f"{fid}.error"] = df.loc[bad, f"{prev}.error"]
    return df


def spector_rows(mat: dict, est: dict | None) -> pd.DataFrame:
    """One row per design: knob settings, the compiler's estimate and the post-fit/board values."""
    ks = np.asarray(mat["knob_settings"])
    names = ([str(x[0]) for x in np.asarray(mat["knob_names"]).ravel()] if "knob_names" in mat
             else [f"knob{j}" for j in range(ks.shape[1])])
    col = {k: np.asarray(v, dtype=float).ravel() for k, v in mat.items()
           if not k.startswith("__") and getattr(v, "shape", (0,))[0] == ks.shape[0] and np.asarray(v).ndim == 2
           and np.asarray(v).shape[1] == 1}
    df = pd.DataFrame({"k:" + n: ks[:, j].astype(int).astype(str) for j, n in enumerate(names)})
    df.insert(0, "sample", np.arange(len(ks)))
    impl = {"runtime": col["run_results_timing"], "alms": col["logic_util"],
            "brams": col.get("ram_util", col.get("ram")), "dsps": col.get("dsp_util", col.get("dsp"))}
    ok = np.isfinite(impl["runtime"]) & (impl["runtime"] > 0)
    for o, v in impl.items():
        if v is not None:
            df[f"impl.{o}"] = np.where(ok, v, np.nan)
    df["impl.valid"] = ok.astype(int)
    df["impl.error"] = np.where(ok, "", "no board runtime")
    pct = mat.get("estim_logic_reg_mem_dsp_percent")
    if est is not None and pct is not None:
        pct = np.asarray(pct, dtype=float)
        rt = np.asarray(est["run_results_timing_esp_tp"], dtype=float).ravel()
        eok = np.isfinite(rt) & (rt > 0)
        vals = {"runtime": rt, "alms": pct[:, 0] / 100 * STRATIX_V["alms"],
                "brams": pct[:, 2] / 100 * STRATIX_V["brams"], "dsps": pct[:, 3] / 100 * STRATIX_V["dsps"]}
        for o, v in vals.items():
            df[f"estimate.{o}"] = np.where(eok, v, np.nan)
        df["estimate.valid"] = eok.astype(int)
        df["estimate.error"] = np.where(eok, "", "no throughput estimate")
    return df


def finish(df: pd.DataFrame, fidelities: list[str], standin: dict) -> pd.DataFrame:
    """Keep the knobs that vary, drop repeated designs (first sample kept), add index and tool seconds."""
    knobs = [c for c in df.columns if c.startswith("k:") and df[c].nunique() > 1]
    df = df.drop_duplicates(subset=knobs, keep="first").reset_index(drop=True)
    out = pd.DataFrame({"index": np.arange(len(df)), "sample": df["sample"]})
    for c in knobs:
        out[knob_name(c[2:])] = df[c].values
    for f in fidelities:
        for c in [c for c in df.columns if c.startswith(f + ".")]:
            out[c] = df[c].values
    for s in ("estimate", "sim", "synth", "impl"):
        out[f"{s}.tool_s"] = standin.get(s, 0.0)
    return out


def write(df: pd.DataFrame, path: str) -> str:
    raw = df.to_csv(index=False, float_format="%.6g").encode()
    buf = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buf, mtime=0, compresslevel=9) as g:
        g.write(raw)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(buf.getvalue())
    return hashlib.sha256(buf.getvalue()).hexdigest()


def entry(df: pd.DataFrame, sha: str, fidelities: list[str], source: str) -> dict:
    objectives = sorted({c.split(".", 1)[1] for c in df.columns if c.split(".", 1)[0] in fidelities
                         and c.split(".", 1)[1] not in ("valid", "error", "tool_s")})
    per_fid = {f: [o for o in objectives if f"{f}.{o}" in df.columns] for f in fidelities}
    first = "runtime" if "runtime" in objectives else "delay_s"
    default = [first, "alms"] if first == "runtime" else ["delay_s", "luts", "ffs"]
    if first not in objectives:  # no latency recorded: LUTs and FFs (DSPs and BRAMs are 0 for some designs,
        default = ["luts", "ffs"]  # and ADRS divides by the true front's values)
    return {"sha256": sha, "source": source, "designs": len(df), "fidelities": fidelities,
            "objectives": per_fid, "default_objectives": default,
            "valid": {f: int(df[f"{f}.valid"].sum()) for f in fidelities}}


def main(hgbo_git: str, spector_git: str) -> None:
    manifest = {}
    for k, variant in MACHSUITE.items():
        src = f"dse_ds/MachSuite/impl_ds/{variant}/p1.zip"
        fids = ["estimate", "synth", "impl"]
        df = finish(machsuite_rows(git_show(hgbo_git, src)), fids, STANDIN_S["machsuite"][k])
        rel = f"machsuite/{k}.csv.gz"
        manifest[f"machsuite_{k}"] = {"file": rel, **entry(df, write(df, os.path.join(ROOT, rel)), fids, src)}
    for k in SPECTOR:
        src = f"results_and_analysis/{k}.mat"
        mat = scipy.io.loadmat(io.BytesIO(git_show(spector_git, src)))
        try:
            est = scipy.io.loadmat(io.BytesIO(git_show(spector_git, f"results_and_analysis/{k}_est_tp.mat")))
        except subprocess.CalledProcessError:
            est = None
        rows = spector_rows(mat, est)
        fids = ["estimate", "impl"] if "estimate.valid" in rows.columns else ["impl"]
        df = finish(rows, fids, STANDIN_S["spector"])
        rel = f"spector/{k}.csv.gz"
        manifest[f"spector_{k}"] = {"file": rel, **entry(df, write(df, os.path.join(ROOT, rel)), fids, src)}
    with open(os.path.join(ROOT, "MANIFEST.json"), "w") as f:
        json.dump({"origin": {s: {"repository": r, "commit": c} for s, (r, c) in ORIGIN.items()},
                   "models": manifest}, f, indent=1, sort_keys=True)
        f.write("\n")
    for name, m in manifest.items():
        print(name, m["designs"], m["fidelities"], m["valid"])


if __name__ == "__main__":
    main(*sys.argv[1:3])
