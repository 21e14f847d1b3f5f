"""Methods from outside tunebench: a YAML with ``cls:`` on ``hydra.searchpath``, an installed package's
entry point (``tunebench.methods``), ``python -m tunebench check-method``; their bad input."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
from omegaconf import OmegaConf

from conftest import ROOT, TINY_LAYER_ARG
from tunebench import methods, targets
from tunebench.config.plugins import entry_point_classes
from tunebench.datasets.models import MODEL_OPTIONS, installed_models
from tunebench.errors import UserError
from tunebench.harness.setup.load import load_experiment
from tunebench.harness.setup.preflight import compose, preflight
from tunebench.methods import METHODS
from tunebench.targets import TARGETS

EXAMPLE = os.path.join(ROOT, "examples", "my_method")
EXAMPLE_CONF = f"hydra.searchpath=[file://{EXAMPLE}/conf]"
FAST = [TINY_LAYER_ARG, "budget.trials_per_task=2", "e2e.enabled=false", "progress=false",
        "target.runner.repeat=2", "target.runner.min_repeat_ms=5"]


@pytest.fixture
def plugins(tmp_path, monkeypatch):
    """The example method importable, a scratch folder for users' modules and configs on sys.path; the
    registries and entry points as they were afterwards."""
    saved = dict(METHODS), dict(TARGETS), set(methods.FROM_YAML), set(targets.FROM_YAML), dict(MODEL_OPTIONS)
    monkeypatch.syspath_prepend(EXAMPLE)
    monkeypatch.syspath_prepend(str(tmp_path))
    entry_point_classes.cache_clear(), installed_models.cache_clear()
    yield tmp_path
    for registry, before in zip((METHODS, TARGETS, methods.FROM_YAML, targets.FROM_YAML, MODEL_OPTIONS), saved):
        registry.clear()
        registry.update(before)
    entry_point_classes.cache_clear(), installed_models.cache_clear()


def _yaml(folder, name: str, text: str) -> str:
    os.makedirs(folder / "conf" / "method", exist_ok=True)
    (folder / "conf" / "method" / f"{name}.yaml").write_text(text)
    return f"hydra.searchpath=[file://{folder}/conf]"


def test_a_yaml_on_the_search_path_names_its_class_and_is_typed_by_its_settings(plugins):
    assert preflight(["-m", EXAMPLE_CONF, "method=my_sa,random", f"workdir={plugins}"]) == 2
    cfg = load_experiment(OmegaConf.to_container(compose([EXAMPLE_CONF, "method=my_sa", "method.t0=0.5",
                                                          f"workdir={plugins}"]), resolve=True))
    assert type(cfg.method).__name__ == "AnnealingSettings" and cfg.method.t0 == 0.5 and cfg.method.cooling == 0.8
    assert cfg.method.cls == "my_method:SimulatedAnnealing" and METHODS["my_sa"].__name__ == "SimulatedAnnealing"
    with pytest.raises(UserError, match=r"^method.t0=-1(\.0)?: must be a positive number"):
        preflight([EXAMPLE_CONF, "method=my_sa", "method.t0=-1", f"workdir={plugins}"])


@pytest.mark.parametrize(("cls", "module", "message"), [
    ("my_method:AnnealingSettings", None, "is not a subclass of tunebench.methods.base.Method"),
    ("broken_mod:Method", "raise RuntimeError('no licence')",
     "module 'broken_mod' does not import: RuntimeError: no licence"),
    ("my_method:Missing", None, "module 'my_method' has no 'Missing'"),
    ("my_method", None, "must be an import path package.module:Class"),
])
def test_a_bad_cls_is_one_line_before_any_run(plugins, cls, module, message):
    if module:
        (plugins / "broken_mod.py").write_text(module)
    search = _yaml(plugins, "mine", f"cls: {cls}\nname: mine\n")
    with pytest.raises(UserError, match=message):
        preflight([search, "method=mine", f"workdir={plugins}"])
    assert not os.path.exists(plugins / "mlflow.db")


UNUSABLE = """
from dataclasses import dataclass, field

from tunebench.config.experiment import MethodSettings
from tunebench.methods.base import Method


class Abstract(Method):
    pass


class PlainSettings(Method):
    Settings = dict

    def ask(self, n):
        return []

    def tell(self, measurements):
        pass


class NoName(PlainSettings):
    Settings = MethodSettings


class NoDefault(PlainSettings):
    @dataclass
    class Settings(MethodSettings):
        name: str = "nodefault"
        z: float = field(kw_only=True)
"""


@pytest.mark.parametrize(("cls", "message"), [
    ("unusable:Abstract", "check-method=unusable:Abstract: Abstract is abstract: it does not define ask"),
    ("unusable:PlainSettings", "PlainSettings.Settings must be a dataclass deriving from"),
    ("unusable:NoName", "its option needs a name (method.name, or a default name on MethodSettings)"),
    ("unusable:NoDefault", "has knobs without a default (z)"),
])
def test_check_method_on_an_unusable_class_is_one_line(plugins, cls, message):
    from tunebench.harness.commands.check_method import cmd_check_method

    (plugins / "unusable.py").write_text(UNUSABLE)
    with pytest.raises(UserError, match=re.escape(message)):
        cmd_check_method(type("Args", (), {"cls": cls, "select": None})())


@pytest.mark.parametrize(("name", "text", "message"), [
    ("mine", "cls: my_method:SimulatedAnnealing\nname: [mine\n", r"mine.yaml:3:1: not valid YAML \(expected ','"),
    ("mine", "name: mine\n\tcls: x\n", r"mine.yaml:2:1: not valid YAML \(found character '\\t'"),
    ("autotvm", "name: autotvm\nplan_size: 8\n", r"autotvm.yaml defines method=autotvm, a built-in option"),
])
def test_a_broken_or_shadowing_yaml_on_the_search_path_is_one_line(plugins, name, text, message):
    search = _yaml(plugins, name, text)
    with pytest.raises(UserError, match=r"^hydra.searchpath: .*" + message):
        preflight([search, "method=mine", f"workdir={plugins}"])
    assert not os.path.exists(plugins / "mlflow.db")


def test_a_name_taken_by_a_builtin_method_is_refused(plugins):
    search = _yaml(plugins, "clash", "cls: my_method:SimulatedAnnealing\nname: random\n")
    with pytest.raises(UserError, match=r"method.name=random: taken by tunebench.methods.random_search.RandomSearch"):
        preflight([search, "method=clash", f"workdir={plugins}"])


def _dist(folder, entry_points: str) -> None:
    """A package's installed metadata (dist-info) with ``entry_points`` on ``folder`` (on sys.path)."""
    info = folder / "tb_plugin-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: tb-plugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(entry_points)


def test_entry_points_register_methods_and_a_broken_one_is_a_warning_until_asked_for(plugins, capsys):
    (plugins / "broken_mod.py").write_text("raise ImportError('needs libfoo')\n")
    _dist(plugins, "[tunebench.methods]\nmy_sa = my_method:SimulatedAnnealing\nbroken = broken_mod:X\n")
    assert preflight(["method=my_sa", f"workdir={plugins}"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("warning: entry point tunebench.methods:broken") \
        and "ImportError: needs libfoo" in err[0], err
    assert preflight(["method=random", f"workdir={plugins}"]) == 1
    with pytest.raises(UserError, match=r"broken_mod:X: module 'broken_mod' does not import: ImportError"):
        preflight(["method=broken", f"workdir={plugins}"])


def test_an_installed_model_factory_is_a_model_option(plugins):
    (plugins / "user_nets.py").write_text("import torch.nn as nn\n\n\ndef small():\n"
                                          "    return nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU())\n")
    _dist(plugins, "[tunebench.models]\nsmall_net = user_nets:small\nbroken_net = user_nets:missing\n")
    cfg = load_experiment(OmegaConf.to_container(compose(["model=small_net", "model.input_shape=[1,3,8,8]",
                                                          f"workdir={plugins}"]), resolve=True))
    assert cfg.model.factory == "user_nets:small" and cfg.model.input_shape == [1, 3, 8, 8]
    with pytest.raises(UserError, match="model.factory=user_nets:missing: module 'user_nets' has no 'missing'"):
        preflight(["model=broken_net", f"workdir={plugins}"])


def _run(args, cwd, **kw):
    env = {**os.environ, "PYTHONPATH": EXAMPLE}
    return subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=900, **kw)


# ~60 s on 2 idle cores: two tuning runs of one tiny layer and the leaderboard; the option's composition and
# typing are the in-process tests above, the method's loop the check-method test below
@pytest.mark.slow
def test_the_example_method_against_autotvm_in_one_sweep_and_its_leaderboard_row(tmp_path):
    done = _run([os.path.join(ROOT, "run.py"), "-m", EXAMPLE_CONF, "method=my_sa,autotvm", *FAST], tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    board = _run(["-m", "tunebench", "leaderboard", "--tracking-uri", f"sqlite:///{tmp_path}/mlflow.db",
                  "--out", str(tmp_path / "lb"), "--no-plots"], tmp_path)
    assert board.returncode == 0, board.stderr[-2000:]
    rows = [ln for ln in (tmp_path / "lb" / "leaderboard.md").read_text().splitlines() if ln.startswith("|")]
    assert any("my_sa" in r for r in rows) and any("autotvm" in r for r in rows), rows


def test_check_method_passes_the_example_and_names_the_rule_a_broken_method_breaks(tmp_path):
    ok = _run(["-m", "tunebench", "check-method", "my_method:SimulatedAnnealing"], tmp_path)
    assert ok.returncode == 0 and " passed" in ok.stdout, ok.stdout[-2000:] + ok.stderr[-2000:]
    (tmp_path / "twice.py").write_text(
        "from my_method import SimulatedAnnealing\n\n\nclass Twice(SimulatedAnnealing):\n"
        "    def ask(self, n):\n        return [self.space.get(0)] * n\n")
    bad = _run(["-m", "tunebench", "check-method", "twice:Twice"], tmp_path)
    assert bad.returncode == 1 and "test_never_measures_a_config_twice" in bad.stdout, bad.stdout[-2000:]


@pytest.mark.slow  # ~90 s: a virtual environment and an editable install; the entry point test above is in-process
def test_the_example_installed_with_pip_is_found_by_its_entry_point(tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True)
    py = str(venv / "bin" / "python")
    install = subprocess.run([py, "-m", "pip", "install", "-q", "--no-deps", "-e", EXAMPLE],
                             capture_output=True, text=True, timeout=600)
    assert install.returncode == 0, install.stderr[-2000:]
    done = subprocess.run([py, os.path.join(ROOT, "run.py"), "method=my_sa", *FAST], cwd=tmp_path,
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0 and "mlflow run" in done.stdout, done.stderr[-2000:]
