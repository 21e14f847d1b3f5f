"""Measured spaces as versioned data files: a task's configurations measured once under the measurement
protocol (``python -m tunebench space measure``), replayed by ``target=replay`` (``model=measured``).

A file is JSON lines (``.jsonl``, or gzipped ``.jsonl.gz``). The first line is the header:

- ``format`` (``"tunebench-space"``) and ``version`` (:data:`VERSION`);
- ``name``, ``task`` (kind, shape, flops, and the template: its name, its source file, that file's
  sha256 ``template_sha256`` and the sha256 of its code ``template_code_sha256``, the source without its
  tunebench import lines (:mod:`tunebench.targets.tvm.template_files`), so that a space measured with
  another version of the template is refused; files written before the code digest existed have only
  ``template_sha256`` and are checked by it), ``target`` (kind,
  the TVM target, threads, precision), ``knobs`` (the template's knobs as ``Space.describe()`` gives them),
  ``subspace`` (how the measured configs were chosen: all, ``max_factor``, ``sample``), ``space_size``
  (configs of the whole template space), ``configs`` (lines that follow: a shorter file is truncated);
- where and when: ``machine`` (CPU model, logical CPUs, host), ``device`` (the measured device's name and, for a
  GPU, its driver version), ``commit``, ``date``, ``tvm``, ``run_id``; a file merged from several sittings
  (``python -m tunebench space merge``) lists each in ``sittings``.

Each further line is one measured configuration: ``digits`` (entity index per knob), ``config`` (its knob
values), ``latency_s`` (median of the repeats; null when it failed), ``latency_std_s``, ``latency_min_s``,
``noisy`` and ``noise`` (the protocol's verdict and signals), ``build_s`` and ``run_s`` (the seconds the
measurement took, charged to the search clock on replay) and ``error`` (why it failed, else "").
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import json
import os
from collections.abc import Sequence

from tunebench.config.knobs import is_int, is_num, short
from tunebench.datasets.kt_cache import read_cache
from tunebench.datasets.measured import MeasuredRow, MeasuredSpace, recorded_number, resolve
from tunebench.datasets.shipped import verify_shipped
from tunebench.errors import UserError
from tunebench.listed_space import ListedSpace
from tunebench.safe_files import atomic_write_bytes
from tunebench.search_space import ChoiceKnob, NumericKnob, Space, SplitKnob

FORMAT = "tunebench-space"
VERSION = 1
HEADER_KEYS = ("name", "task", "target", "knobs", "space_size", "configs", "machine", "commit", "date")
ROW_KEYS = ("digits", "config", "latency_s", "build_s", "run_s")


def _unzipped(raw: bytes) -> bytes:
    """A file's bytes, gunzipped when gzipped (OSError, EOFError: a corrupt gzip stream)."""
    return gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw


def is_space_file(text: bytes) -> bool:
    """Whether ``text`` (a file's bytes, gunzipped) starts like a space file's header."""
    return text.lstrip()[:64].replace(b" ", b"").startswith(b'{"format":"' + FORMAT.encode())


def write_space_file(path: str, header: dict, rows: Sequence[dict]) -> None:
    """Write ``header`` (``format``/``version``/``configs`` filled in) and ``rows`` to ``path``, whole or
    not at all (a temporary file renamed into place); gzipped when ``path`` ends in ``.gz``."""
    head = {"format": FORMAT, "version": VERSION, **header, "configs": len(rows)}
    text = "".join(json.dumps(r, separators=(",", ":"), allow_nan=False) + "\n" for r in [head, *rows])
    data = gzip.compress(text.encode(), mtime=0) if path.endswith(".gz") else text.encode()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    atomic_write_bytes(path, data, mode=0o644)


def _knob(d, path: str):
    """A knob from its description in the header (``Space.describe()``), every field checked."""
    kinds = {"split": lambda: SplitKnob(d["name"], d["length"], d["n_parts"]),
             "choice": lambda: ChoiceKnob(d["name"], tuple(_plain(v) for v in d["values"])),
             "numeric": lambda: NumericKnob(d["name"], tuple(d["values"]))}
    fields = {"split": lambda: is_int(d["length"]) and 1 <= d["length"] <= 2**31 and is_int(d["n_parts"])
              and 1 <= d["n_parts"] <= 8,
              "choice": lambda: isinstance(d["values"], list) and d["values"],
              "numeric": lambda: isinstance(d["values"], list) and d["values"] and all(map(is_num, d["values"]))}
    try:
        if not (isinstance(d["name"], str) and d["name"] and fields[d["type"]]()):
            raise ValueError
        return kinds[d["type"]]()
    except (KeyError, TypeError, ValueError):
        raise UserError(f"model.path={path}: knob {short(d)} is not a knob description "
                        f"(types: {', '.join(kinds)})") from None


def _plain(v):
    return tuple(v) if isinstance(v, list) else v


def _lines(raw: bytes, path: str) -> list[dict]:
    try:
        text = _unzipped(raw).decode()
    except (OSError, EOFError, UnicodeDecodeError) as exc:
        raise UserError(f"model.path={path}: not a readable space file (corrupt or truncated?): {exc}") from None
    out = []
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except ValueError:
            raise UserError(f"model.path={path}:{lineno}: not JSON (corrupt or truncated file)") from None
        if not isinstance(item, dict):
            raise UserError(f"model.path={path}:{lineno}: a line is a JSON object, not {type(item).__name__}")
        out.append(item)
    return out


def _row(item: dict, space, lineno: int, path: str) -> tuple[tuple, MeasuredRow]:
    where = f"model.path={path}:{lineno}"
    missing = [k for k in ROW_KEYS if k not in item]
    if missing:
        raise UserError(f"{where}: a measured config without {', '.join(missing)}")
    digits = item["digits"]
    if (not isinstance(digits, list) or len(digits) != len(space.knobs)
            or any(not is_int(d) or not 0 <= d < n for d, n in zip(digits, space.dims))):
        raise UserError(f"{where}: digits={short(digits)} do not fit the knobs {space.names}")
    values = {k.name: _listed(k.entities[d]) for k, d in zip(space.knobs, digits)}
    if values != item["config"]:
        raise UserError(f"{where}: config {short(item['config'])} is not what digits {digits} name ({values}): "
                        "the file was edited or is corrupt")
    error, noisy = item.get("error") or "", item.get("noisy", False)
    if not isinstance(error, str) or not isinstance(noisy, bool):
        bad = "error" if not isinstance(error, str) else "noisy"
        raise UserError(f"{where}: {bad}={short(item[bad])}: must be {'text' if bad == 'error' else 'true or false'}")
    lat = recorded_number(where, "latency_s", item["latency_s"], positive=True, default=None)
    return tuple(digits), MeasuredRow(lat, recorded_number(where, "latency_std_s", item.get("latency_std_s"), default=0.0),
                                      recorded_number(where, "build_s", item["build_s"]),
                                      recorded_number(where, "run_s", item["run_s"]), error=error, noisy=noisy)


def _listed(v):
    return list(v) if isinstance(v, tuple) else v


def _check_header(head: dict, path: str) -> None:
    """The header's keys and the types of what the reader uses (a count of configs > 0: a file that
    promises none has nothing to replay)."""
    missing = [k for k in HEADER_KEYS if k not in head]
    if missing:
        raise UserError(f"model.path={path}: the header has no {', '.join(missing)}")
    types = {"name": (str, "text"), "task": (dict, "a mapping"), "target": (dict, "a mapping"),
             "machine": (dict, "a mapping"), "knobs": (list, "a list of knob descriptions")}
    for key, (kind, what) in types.items():
        if not isinstance(head[key], kind) or (kind is not str and not head[key]):
            raise UserError(f"model.path={path}:1: header {key}={short(head[key])}: must be non-empty {what}")
    for key, value in (("configs", head["configs"]), ("space_size", head["space_size"])):
        if not is_int(value) or value < 1:
            raise UserError(f"model.path={path}:1: header {key}={short(value)}: must be a positive integer "
                            "(a space file holds at least one measured config)")
    flops = head["task"].get("flops", 0)
    if not is_int(flops) or flops < 0:
        raise UserError(f"model.path={path}:1: header task.flops={short(flops)}: must be an integer >= 0")
    nested = [("task", "kind", str), ("task", "shape", dict), ("task", "template", str), ("task", "template_file", str),
              ("task", "template_sha256", str), ("task", "template_code_sha256", str), ("target", "tvm_target", dict),
              ("machine", "cpu", str)]
    for part, key, kind in nested:
        value = head[part].get(key)
        if value is not None and not isinstance(value, kind):
            raise UserError(f"model.path={path}:1: header {part}.{key}={short(value)}: must be "
                            f"{'text' if kind is str else 'a mapping'}")


def read_space_file(path: str, raw: bytes | None = None) -> MeasuredSpace:
    """The measured space of a space file (module docstring); ``meta`` is its header.

    Raises:
        UserError: a missing, unreadable, corrupt or truncated file; another format or version; a line
            whose config does not fit the header's knobs.
    """
    if raw is None:
        if not os.path.isfile(path):
            raise UserError(f"model.path={path}: no such file")
        raw = open(path, "rb").read()
    items = _lines(raw, path)
    if not items or items[0].get("format") != FORMAT:
        raise UserError(f"model.path={path}: not a tunebench space file (its first line has no "
                        f"\"format\": \"{FORMAT}\")")
    head, body = items[0], items[1:]
    if head.get("version") != VERSION:
        raise UserError(f"model.path={path}: space file version {head.get('version')!r}; this tunebench reads "
                        f"version {VERSION}")
    _check_header(head, path)
    if len(body) != head["configs"]:
        raise UserError(f"model.path={path}: {len(body)} measured configs, the header says {head['configs']}: "
                        "the file is truncated or was edited")
    knobs = [_knob(d, path) for d in head["knobs"]]
    product = Space(knobs)
    parsed = [_row(item, product, lineno, path) for lineno, item in enumerate(body, 2)]
    space = ListedSpace(knobs, [d for d, _ in parsed])
    if space.size != len(parsed):
        raise UserError(f"model.path={path}: a configuration is listed twice")
    device = (head.get("device") or {}).get("name") if isinstance(head.get("device"), dict) else None
    return MeasuredSpace(name=str(head["name"]), device=str(device or head["machine"].get("cpu", "?")), space=space,
                         rows=[r for _, r in parsed], origin=os.path.abspath(path),
                         digest=hashlib.sha256(raw).hexdigest()[:12], flops=int(head["task"].get("flops", 0)),
                         meta=head)


def space_file_lines(path: str) -> tuple[dict, list[dict]]:
    """The header and the measured-config lines of the space file at ``path``, as written, after the checks
    of :func:`read_space_file` (UserError on a missing, corrupt or edited file)."""
    raw = open(path, "rb").read() if os.path.isfile(path) else None
    read_space_file(path, raw)
    items = _lines(raw, path)
    return items[0], items[1:]


def read_measured(path: str) -> MeasuredSpace:
    """The measured space in ``path`` (a space file or a Kernel Tuner cache; a relative path that is no
    file names a shipped one under ``data/``), read once per file version."""
    path = resolve(path)
    if not os.path.isfile(path):
        raise UserError(f"model.path={path}: no such file")
    st = os.stat(path)
    return _read_measured(path, st.st_mtime_ns, st.st_size)


@functools.lru_cache(maxsize=64)
def _read_measured(path: str, mtime_ns: int, size: int) -> MeasuredSpace:
    raw = open(path, "rb").read()
    verify_shipped(path, raw)  # a shipped file (data/, SHA256SUMS beside it) must be as shipped
    try:
        space_file = is_space_file(_unzipped(raw))
    except (OSError, EOFError):
        space_file = False  # a corrupt gzip file: the Kernel Tuner reader says so
    measured = read_space_file(path, raw) if space_file else read_cache(path)
    if not measured.n_valid:
        first = next((r.error for r in measured.rows if r.error), "no error recorded")
        raise UserError(f"model.path={path}: none of its {measured.space.size} configurations has a measured "
                        f"latency (the first failure: {first[:80]}): nothing to replay")
    return measured
