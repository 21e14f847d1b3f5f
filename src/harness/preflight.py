"""``run.py``'s command line checked before Hydra runs anything: every job of a sweep is composed and
validated, and Hydra's own errors (a typo'd key, a sweep without ``-m``, an override it cannot parse)
become one line naming the value and what is valid.
"""

from __future__ import annotations

import itertools
import os

from tunebench.errors import UserError
from tunebench.harness.config_check import CONF_DIR, GROUPS, group_options, validate_config

MULTIRUN = ("-m", "--multirun")
PASS_THROUGH = ("-h", "--help", "--hydra-help", "-c", "--cfg", "-i", "--info", "--shell-completion", "-sc")
MAX_JOBS = 512  # a bigger sweep is validated on its first MAX_JOBS jobs


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
            raise UserError(f"cannot parse the override {text!r}: {reason} (syntax: key=value, "
                            "see https://hydra.cc/docs/advanced/override_grammar/basic)") from None
    return parsed


def _values(o) -> list[str]:
    return [str(v) for v in o.sweep_string_iterator()] if o.is_sweep_override() else [None]


def _check_groups(parsed, conf_dir: str, multirun: bool) -> None:
    for o in parsed:
        if o.is_sweep_override() and not multirun:
            raise UserError(f"{o.input_line} is a sweep (several values): add -m to run one job per value")
        if o.key_or_group in GROUPS:
            valid = group_options(conf_dir, o.key_or_group)
            for v in (_values(o) if o.is_sweep_override() else [o.get_value_element_as_str()]):
                if v not in valid:
                    raise UserError(f"{o.key_or_group}={v!r} is unknown; valid: {', '.join(valid)}")


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


def _compose(job: list[str], conf_dir: str):
    from hydra import compose, initialize_config_dir
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    with initialize_config_dir(config_dir=os.path.abspath(conf_dir), version_base="1.3"):
        try:
            return compose(config_name="config", overrides=job)
        except (HydraException, OmegaConfBaseException) as exc:
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
    overrides = [a for a in argv if not a.startswith("-")]
    parsed = _parse(overrides)
    _check_groups(parsed, conf_dir, multirun)
    user = [o for o in parsed if not o.key_or_group.startswith("hydra")]
    has_workdir = any(o.key_or_group == "workdir" for o in user)
    groups = [o.input_line for o in user if o.key_or_group in GROUPS and not o.is_sweep_override()]
    _check_keys(OmegaConf.to_container(_compose(groups, conf_dir), resolve=False), user)
    jobs = _jobs(user)
    for job in jobs:
        cfg = _compose(job + ([] if has_workdir else [f"workdir={os.getcwd()}"]), conf_dir)
        validate_config(OmegaConf.to_container(cfg, resolve=True), conf_dir)
    return len(jobs)
