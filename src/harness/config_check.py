"""Every config value checked before any work starts: one :class:`UserError` naming the key, the bad
value and what is valid.

Three layers of checks, cheapest first:

1. :func:`check_types`: each value has the type of its default in the group's YAML file (a number
   where the default is a number, true/false where it is a bool, ...).
2. :data:`RULES`: ranges and choices of the harness's own keys (``target.batch_size`` a positive
   integer, ``target.runner.statistic`` median or mean, ...).
3. The owners' own checks: :func:`~tunebench.methods.make_method` (hyperparameter names and
   values), :func:`~tunebench.harness.experiment.make_budget`, the ``measure``/``e2e`` settings,
   the model's layer specs (:func:`check_layers`) and the paths (:func:`check_paths`).

Checks that need the machine (the CPU name, a GPU, the tracking store, method/target compatibility)
run in :func:`tunebench.harness.experiment.run_experiment`, still before a run is created.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from tunebench.errors import UserError
from tunebench.resources import conf_dir

CONF_DIR = conf_dir()
GROUPS = ("method", "model", "target", "budget")  # the config groups chosen by name (method=..., ...)


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_num(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _rule(test: Callable[[Any], bool], what: str, nullable: bool = False):
    def check(v) -> str | None:
        if v is None and nullable:
            return None
        return None if test(v) else what + (" or null" if nullable else "")
    return check


POS_INT = _rule(lambda v: _is_int(v) and v > 0, "must be a positive integer")
NONNEG_INT = _rule(lambda v: _is_int(v) and v >= 0, "must be an integer >= 0")
POS_NUM = _rule(lambda v: _is_num(v) and v > 0, "must be a positive number")
NONNEG_NUM = _rule(lambda v: _is_num(v) and v >= 0, "must be a number >= 0")
BOOL = _rule(lambda v: isinstance(v, bool), "must be true or false")
NAME = _rule(lambda v: isinstance(v, str) and v.strip() != "", "must be a non-empty string")


def choice(*valid: str):
    return _rule(lambda v: v in valid, "valid: " + ", ".join(valid))


def opt(rule):
    return lambda v: None if v is None else rule(v)


def _str_list(v) -> bool:
    return isinstance(v, list) and len(v) > 0 and all(isinstance(x, str) and x for x in v)


# dotted key -> check (returns what is wrong, or None); keys missing from a config are not checked
RULES: dict[str, Callable] = {
    "seed": NONNEG_INT, "experiment": NAME, "records_dir": NAME, "check_correctness": BOOL, "progress": BOOL,
    "resume": opt(NAME), "tracking.uri": opt(NAME), "tracking.artifact_root": opt(NAME),
    "tracking.outage_wait_s": NONNEG_NUM,
    "model.seed": NONNEG_INT,
    "target.batch_size": POS_INT, "target.num_cores": opt(POS_INT), "target.device_id": NONNEG_INT,
    "target.max_vthread": POS_INT, "target.mcpu": opt(NAME), "target.lock_dir": opt(NAME),
    "target.handler": opt(_rule(lambda v: isinstance(v, str) and ":" in v, 'must be "module:function"')),
    "target.builder.n_parallel": opt(POS_INT), "target.builder.timeout_s": POS_NUM,
    "target.runner.number": POS_INT, "target.runner.repeat": POS_INT, "target.runner.min_repeat_ms": NONNEG_NUM,
    "target.runner.timeout_s": POS_NUM, "target.runner.cooldown_s": NONNEG_NUM,
    "target.runner.statistic": choice("median", "mean"),
    "target.rpc.priority": NONNEG_INT, "target.rpc.wait_s": POS_NUM,  # tracker, key: rpc_settings below
    "target.check.tolerance": POS_NUM, "target.check.timeout_s": POS_NUM,
    "target.check.reference_cache": opt(NAME),
    "target.fidelities": _rule(_str_list, "must be a non-empty list of fidelity names"),
    "target.objectives": _rule(_str_list, "must be a non-empty list of objective names"),
    "target.reference_point": _rule(lambda v: isinstance(v, list) and v and all(_is_num(x) and x > 0 for x in v),
                                    "must be a list of positive numbers"),
    "target.clock_ns": POS_NUM, "target.device.freq_mhz": POS_NUM, "target.device.seed": NONNEG_INT,
    "target.table": opt(NAME), "target.workdir": opt(NAME),
}


def _leaves(d: dict, prefix: str = ""):
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict) and v:
            yield from _leaves(v, key + ".")
        else:
            yield key, v


_MISSING = object()


def dotted_get(d: dict, dotted: str, default=_MISSING):
    """``d["a"]["b"]`` for ``"a.b"``; ``default`` when a part is missing (KeyError without one)."""
    for part in dotted.split("."):
        if not isinstance(d, dict) or part not in d:
            if default is _MISSING:
                raise KeyError(dotted)
            return default
        d = d[part]
    return d


def group_options(conf_dir: str, group: str) -> list[str]:
    """The options of a config group: the YAML files in ``conf/<group>/``."""
    folder = os.path.join(conf_dir, group)
    return sorted(f[:-5] for f in os.listdir(folder) if f.endswith(".yaml"))


def _short(v) -> str:
    text = repr(v)
    return text if len(text) <= 80 else text[:77] + "..."


def check_rules(cfg: dict) -> None:
    """Apply :data:`RULES` to the keys present in ``cfg``."""
    for key, rule in RULES.items():
        try:
            value = dotted_get(cfg, key)
        except KeyError:
            continue
        problem = rule(value)
        if problem:
            raise UserError(f"{key}={_short(value)}: {problem}")
    target = cfg.get("target") or {}
    if "template" in target:
        from tunebench.targets.tvm.variants import template_problem

        problem = template_problem(str(target.get("kind")), target["template"])
        if problem:
            raise UserError(f"target.template={_short(target['template'])}: {problem}")
    if isinstance(target.get("rpc"), dict):  # tracker and key: both or neither
        from tunebench.targets.tvm.rpc import rpc_settings

        rpc_settings(target)
    for key in ("timeout_s",):  # FPGA targets: a mapping of stage -> seconds
        stages = (cfg.get("target") or {}).get(key)
        if isinstance(stages, dict):
            for stage, v in stages.items():
                if POS_NUM(v):
                    raise UserError(f"target.{key}.{stage}={_short(v)}: {POS_NUM(v)}")


def _type_problem(default, value) -> str | None:
    if default is None or value is None and default is None:
        return None
    if isinstance(default, bool):
        return None if isinstance(value, bool) else "must be true or false"
    if _is_num(default):
        return None if _is_num(value) else "must be a number"
    if isinstance(default, str):
        return None if isinstance(value, str) or value is None else "must be a string"
    if isinstance(default, list):
        return None if isinstance(value, list) else "must be a list"
    if isinstance(default, dict):
        return None if isinstance(value, dict) else "must be a mapping"
    return None


def group_defaults(group: str, name: str, conf_dir: str = CONF_DIR) -> dict:
    """The YAML defaults of one option of a config group (``conf/<group>/<name>.yaml``), with those
    of the options of the same group its ``defaults:`` list names; empty when there is no such file."""
    import yaml

    path = os.path.join(conf_dir, group, f"{name}.yaml")
    if not os.path.isfile(path):
        return {}
    with open(path) as fh:
        data = yaml.safe_load(fh) or {}
    merged: dict = {}
    for entry in data.pop("defaults", None) or []:  # an option composed from others of its group (chameleon)
        if isinstance(entry, str) and entry != "_self_":
            merged.update(group_defaults(group, entry, conf_dir))
    return {**merged, **data}


def _nullable(group: str, name: str) -> frozenset[str]:
    """The keys of a group option that take null besides their default's type (methods declare them)."""
    if group != "method":
        return frozenset()
    from tunebench.methods import METHODS

    return getattr(METHODS.get(name), "nullable", frozenset())


def check_types(cfg: dict, conf_dir: str = CONF_DIR) -> None:
    """Each value of the method, model and target groups has the type of its YAML default."""
    for group in ("target", "model", "method"):
        sub = cfg.get(group)
        if not isinstance(sub, dict):
            raise UserError(f"{group}={_short(sub)}: must be a config group (a mapping)")
        name = sub.get("name")
        if not os.path.isfile(os.path.join(conf_dir, group, f"{name}.yaml")):
            raise UserError(f"{group}.name={_short(name)} is unknown; valid: {', '.join(group_options(conf_dir, group))}")
        defaults = group_defaults(group, name, conf_dir)
        nullable = _nullable(group, name)
        for key, default in _leaves(defaults):
            try:
                value = dotted_get(sub, key)
            except KeyError:
                continue
            problem = None if value is None and key in nullable else _type_problem(default, value)
            if problem:
                raise UserError(f"{group}.{key}={_short(value)}: {problem} (default {_short(default)})")


def _writable_folder(path: str) -> bool:
    """``path`` is a folder this process can create entries in (tried: root ignores permission bits)."""
    import tempfile

    if not os.path.isdir(path):
        return False
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".tunebench-probe-", dir=path))
    except OSError:
        return False
    return True


def check_paths(cfg: dict) -> None:
    """``workdir`` is a writable folder; ``records_dir`` (relative to it) is or can be made one."""
    workdir = cfg.get("workdir")
    if not isinstance(workdir, str) or not workdir:
        raise UserError(f"workdir={_short(workdir)}: must be a folder")
    if not _writable_folder(workdir):
        raise UserError(f"workdir={workdir}: not a writable folder")
    records = os.path.join(os.path.abspath(workdir), cfg.get("records_dir") or "records")
    probe = records
    while not os.path.exists(probe):
        probe = os.path.dirname(probe)
    if not _writable_folder(probe):
        raise UserError(f"records_dir={cfg.get('records_dir')}: {probe} is not a writable folder")


def check_layers(model: dict) -> None:
    """``model=layers``: a non-empty list of valid conv layer specs (each value named when wrong);
    ``model=ops``: known operators and case numbers."""
    from tunebench.datasets.layer_spec import check_layer_list
    from tunebench.datasets.operators import OPS_MODEL, select_cases

    if model.get("name") == "layers":
        check_layer_list(model.get("layers"))
    elif model.get("name") == OPS_MODEL:
        select_cases(model.get("operators"), model.get("cases"))


def check_operator_templates(cfg: dict) -> None:
    """``model=ops`` with a knob method: every chosen operator has a template in ``target.template``
    (methods that make their own schedules, metaschedule and gat, need none)."""
    from tunebench.datasets.operators import OPS_MODEL, kind_of, select_cases
    from tunebench.methods import METHODS
    from tunebench.targets.tvm.templates import missing_template
    from tunebench.targets.tvm.variants import VARIANTS

    target = cfg.get("target") or {}
    if cfg["model"].get("name") != OPS_MODEL or target.get("kind") not in VARIANTS:
        return
    method = METHODS.get((cfg.get("method") or {}).get("name"))
    if method is not None and method.needs.compiles:
        return
    template = target.get("template") or VARIANTS[target["kind"]][0]
    for abbr, number, shape in select_cases(cfg["model"].get("operators"), cfg["model"].get("cases")):
        if problem := missing_template(kind_of(abbr, shape), target["kind"], template):
            raise UserError(f"task {abbr}_{number}: {problem}")


def validate_config(cfg: dict, conf_dir: str = CONF_DIR) -> None:
    """All static checks of a resolved experiment config (no machine, store or target touched)."""
    from tunebench.harness.e2e_timing import E2ESettings
    from tunebench.harness.experiment import apply_method_overrides, make_budget
    from tunebench.harness.measurement import ProtocolSettings
    from tunebench.methods import make_method

    check_types(cfg, conf_dir)
    check_rules(cfg)
    check_paths(cfg)
    check_layers(cfg["model"])
    check_operator_templates(cfg)
    make_budget(cfg.get("budget") or {})
    make_method(apply_method_overrides(cfg)["method"])
    ProtocolSettings.from_cfg(cfg.get("measure"))
    E2ESettings.from_cfg(cfg.get("e2e"))
