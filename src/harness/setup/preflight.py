"""``run.py``'s command line checked before Hydra runs anything: every job of a sweep is composed,
typed and validated, and Hydra's own errors (a typo'd key, a sweep without ``-m``, an override it
cannot parse) become one line naming the value and what is valid.
"""

from __future__ import annotations

import itertools
import os

from tunebench.config.knobs import short
from tunebench.config.load import config_error, unknown_keys
from tunebench.errors import UserError
from tunebench.harness.setup.load import load_experiment
from tunebench.harness.setup.store import (
    CONF_DIR,
    GROUPS,
    builtin_options,
    failed_options,
    group_options,
    register_configs,
)
from tunebench.harness.setup.validate import validate_config

MULTIRUN = ("-m", "--multirun")
PASS_THROUGH = ("-h", "--help", "--hydra-help", "-c", "--cfg", "-i", "--info", "--shell-completion", "-sc")
MAX_JOBS = 512  # a bigger sweep is validated on its first MAX_JOBS jobs
LAUNCHERS = {"basic": "", "joblib": "", "tunebench_ray": " (Ray: needs the scale extra, make install EXTRAS=test,scale)"}


def _parse(overrides: list[str]):
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import OverrideParseException

    parser = OverridesParser.create()
    parsed = []
    for text in overrides:
        try:
            parsed += parser.parse_overrides([text])
        except OverrideParseException as exc:
            reason = str(exc).splitlines()[0]
            raise UserError(f"cannot parse the override {short(text)}: {reason} (syntax: key=value, "
                            "see https://hydra.cc/docs/advanced/override_grammar/basic)") from None
        except ValueError as exc:  # an integer of more than 4300 digits, which Python refuses to read
            reason = str(exc).splitlines()[0].split(" for integer string conversion")[0]
            raise UserError(f"cannot parse the override {short(text)}: {reason} (digits of a number)") from None
    return parsed


def _values(o) -> list[str]:
    return [str(v) for v in o.sweep_string_iterator()] if o.is_sweep_override() else [None]


def search_folders(parsed) -> tuple[str, ...]:
    """The folders of ``hydra.searchpath=[file://..., pkg://...]`` (a user's config groups)."""
    import importlib.util

    folders = []
    for o in parsed:
        if o.key_or_group != "hydra.searchpath" or o.is_delete():
            continue
        entries = o.value() if isinstance(o.value(), list) else [o.value()]
        for entry in map(str, entries):
            scheme, _, where = entry.partition("://")
            if scheme == "file":
                folders.append(os.path.abspath(where))
            elif scheme == "pkg":
                package, _, sub = where.partition("/")
                spec = importlib.util.find_spec(package) if package else None
                if spec is None or not spec.submodule_search_locations:
                    raise UserError(f"hydra.searchpath: {entry} names no importable package")
                folders.append(os.path.join(list(spec.submodule_search_locations)[0], sub))
            else:
                raise UserError(f"hydra.searchpath: {short(entry)} must start with file:// or pkg://")
    return tuple(folders)


def check_search_yaml(search: tuple[str, ...], conf_dir: str = CONF_DIR) -> None:
    """Every option YAML in the search folders (``<folder>/<group>/<name>.yaml``) is readable YAML and
    adds a new option: one that has a built-in option's name would shadow it (which of the two a run
    got would depend on the search order), so it is refused naming both.

    Raises:
        UserError: one line naming the file, and the line and column of a YAML error.
    """
    import yaml

    for root in search:
        for group in GROUPS:
            folder = os.path.join(root, group)
            names = sorted(f for f in os.listdir(folder) if f.endswith(".yaml")) if os.path.isdir(folder) else []
            builtin = builtin_options(group, conf_dir) if names else set()
            for name in names:
                path = os.path.join(folder, name)
                if name[:-5] in builtin:
                    raise UserError(f"hydra.searchpath: {path} defines {group}={name[:-5]}, a built-in option; "
                                    "give your option another name")
                try:
                    with open(path) as fh:
                        yaml.safe_load(fh)
                except yaml.YAMLError as exc:
                    mark = getattr(exc, "problem_mark", None)
                    where = f":{mark.line + 1}:{mark.column + 1}" if mark else ""
                    what = getattr(exc, "problem", None) or str(exc).splitlines()[0]
                    raise UserError(f"hydra.searchpath: {path}{where}: not valid YAML ({what})") from None
                except OSError as exc:
                    raise UserError(f"hydra.searchpath: {path}: cannot be read ({exc.strerror})") from None


def _check_groups(parsed, conf_dir: str, multirun: bool) -> None:
    search = search_folders(parsed)
    check_search_yaml(search, conf_dir)
    for o in parsed:
        if o.is_sweep_override() and not multirun:
            raise UserError(f"{o.input_line} is a sweep (several values): add -m to run one job per value")
        values = _values(o) if o.is_sweep_override() else [o.get_value_element_as_str()]
        if o.key_or_group in GROUPS:
            valid = group_options(o.key_or_group, conf_dir, search)
        elif o.key_or_group == "hydra/launcher":
            valid = list(LAUNCHERS)
        else:
            continue
        for v in values:
            if v not in valid and v in failed_options(o.key_or_group):
                raise UserError(failed_options(o.key_or_group)[v])
            if v not in valid:
                hint = "".join(LAUNCHERS.get(x, "") for x in valid if x == "tunebench_ray" and "ray" in str(v))
                raise UserError(f"{o.key_or_group}={v!r} is unknown; valid: {', '.join(valid)}{hint}")


def check_overrides(overrides: list[str], conf_dir: str = CONF_DIR, multirun: bool = True) -> None:
    """Parse the overrides and check the config-group options they name (method=, model=, ...)."""
    _check_groups(_parse([a for a in overrides if not a.startswith("-")]), conf_dir, multirun)


def _jobs(parsed) -> list[list[str]]:
    """The override list of every job of the sweep (one job without ``-m``)."""
    axes = []
    for o in parsed:
        if o.is_sweep_override():
            axes.append([f"{o.get_key_element()}={v}" for v in _values(o)])
        else:
            axes.append([o.input_line])
    return [list(job) for job in itertools.islice(itertools.product(*axes), MAX_JOBS)]


def _check_keys(cfg: dict, parsed) -> None:
    """Each overridden key exists (Hydra's struct error, as one line with the valid keys)."""
    for o in parsed:
        key = o.key_or_group
        if o.is_add() or o.is_delete() or o.key_or_group in GROUPS or key.startswith("hydra"):
            continue
        node, path = cfg, []
        for part in key.split("."):
            if not isinstance(node, dict) or part not in node:
                where = ".".join(path) or "the config"
                valid = ", ".join(str(k) for k in node) if isinstance(node, dict) else "(not a mapping)"
                raise UserError(f"{key} is unknown: {where} has no key {part!r}; valid: {valid}")
            node, path = node[part], path + [part]


def _check_value_types(cfg, parsed) -> None:
    """A true/false knob given anything but true or false, a text knob given a number: OmegaConf would
    convert (2 -> True, 5 -> "5"); the command line must say what it means."""
    from omegaconf import DictConfig
    from omegaconf.nodes import BooleanNode, StringNode

    for o in parsed:
        if o.is_delete() or o.is_sweep_override() or o.key_or_group in GROUPS or o.key_or_group.startswith("hydra"):
            continue
        node = cfg
        for part in o.key_or_group.split("."):
            node = node._get_node(part) if isinstance(node, DictConfig) else None
        value = o.value()
        if value is None:
            continue
        if isinstance(node, BooleanNode) and not isinstance(value, bool):
            raise UserError(f"{o.key_or_group}={short(value)}: must be true or false")
        if isinstance(node, StringNode) and not isinstance(value, str):
            raise UserError(f"{o.key_or_group}={short(value)}: must be a string")


def compose(job: list[str], conf_dir: str = CONF_DIR):
    """The composed config of one job (a DictConfig), every Hydra/OmegaConf error as one line."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    register_configs(conf_dir)
    with initialize_config_dir(config_dir=os.path.abspath(conf_dir), version_base="1.3"):
        try:
            return hydra_compose(config_name="config", overrides=job)
        except (HydraException, OmegaConfBaseException) as exc:
            cause = exc.__cause__
            if isinstance(cause, OmegaConfBaseException) and getattr(cause, "full_key", None):
                raise config_error(cause) from None
            lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
            raise UserError(f"{' '.join(job)}: {'; '.join(lines[:2])}") from None


def preflight(argv: list[str], conf_dir: str = CONF_DIR) -> int:
    """Validate every job ``python run.py <argv>`` would run; returns the number of jobs checked.

    Raises:
        UserError: the first bad value (one line).
    """
    from omegaconf import OmegaConf

    if any(a in PASS_THROUGH or a.startswith("--cfg") for a in argv):
        return 0  # help / config printing: Hydra's own business
    multirun = any(a in MULTIRUN for a in argv)
    parsed = _parse([a for a in argv if not a.startswith("-")])
    _check_groups(parsed, conf_dir, multirun)
    user = [o for o in parsed if not o.key_or_group.startswith("hydra")]
    search = [o.input_line for o in parsed if o.key_or_group == "hydra.searchpath"]
    has_workdir = any(o.key_or_group == "workdir" for o in user)
    groups = [o.input_line for o in user if o.key_or_group in GROUPS and not o.is_sweep_override()]
    _check_keys(OmegaConf.to_container(compose(search + groups, conf_dir), resolve=False), user)
    jobs = _jobs(user)
    for job in jobs:
        cfg = compose(search + job + ([] if has_workdir else [f"workdir={os.getcwd()}"]), conf_dir)
        _check_value_types(cfg, user)
        unknown_keys(cfg)
        validate_config(load_experiment(OmegaConf.to_container(cfg, resolve=True)))
    return len(jobs)
