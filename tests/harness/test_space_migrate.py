"""``space migrate``: a space file measured before the template code digest existed gets it, proven from the
template at the file's recorded commit (a throwaway git checkout here); a file whose recorded template is
not the one at its commit, or whose template's code changed since, is refused in one line, nothing written."""

from __future__ import annotations

import hashlib
import json
import subprocess

import pytest

from helpers import TINY_TEMPLATE, write_tiny_space
from tunebench.datasets.models import MeasuredModel
from tunebench.datasets.space_file import space_file_lines, write_space_file
from tunebench.errors import UserError
from tunebench.targets.replay import ReplaySettings, ReplayTarget
from tunebench.targets.tvm.template_files import PACKAGE_ROOT, template_code_digest

TEMPLATE = open(f"{PACKAGE_ROOT}/{TINY_TEMPLATE}", "rb").read()
#: the template before a module it imports was renamed: only a tunebench import line differs (a module name
#: no real version had, so that the version is not one the checkout knows, ``KNOWN_SOURCES``)
BEFORE = TEMPLATE.replace(b"from tunebench.search_space import", b"from tunebench.knob_space import", 1)


def _git(repo, *args) -> str:
    return subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
                          check=True, capture_output=True, text=True).stdout.strip()


def _commit(repo, source: bytes) -> str:
    path = repo / "src" / TINY_TEMPLATE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(source)
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "template")
    return _git(repo, "rev-parse", "HEAD")


@pytest.fixture
def repo(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    return repo


def _old_file(path: str, commit: str, source: bytes) -> str:
    """A tiny space file as written before the code digest: ``template_sha256`` of ``source``, ``commit``."""
    write_tiny_space(path, sha=hashlib.sha256(source).hexdigest(), code_sha="")
    head, rows = space_file_lines(path)
    write_space_file(path, {**{k: v for k, v in head.items() if k not in ("format", "version", "configs")},
                            "commit": commit}, rows)
    return path


def _main(argv, capsys):
    from tunebench.__main__ import main

    with pytest.raises(SystemExit) as exc:
        main(argv)
    return exc.value.code, capsys.readouterr().err.strip().splitlines()


def test_an_old_file_gets_the_code_digest_of_its_template_at_its_commit(repo, tmp_path, capsys):
    assert BEFORE != TEMPLATE
    path = _old_file(str(tmp_path / "old.jsonl"), _commit(repo, BEFORE), BEFORE)
    before = open(path, "rb").read().splitlines(keepends=True)
    with pytest.raises(UserError, match=r"re-measure it .*python -m tunebench space migrate \S+old.jsonl$"):
        ReplayTarget(ReplaySettings()).load_tasks(MeasuredModel(path=path))
    from tunebench.__main__ import main

    main(["space", "migrate", "--repo", str(repo), path])
    assert capsys.readouterr().out == f"{path}: template_code_sha256 {template_code_digest(TINY_TEMPLATE)[:12]} added\n"
    after = open(path, "rb").read().splitlines(keepends=True)
    assert after[1:] == before[1:]  # the measured lines as they were
    head, old = json.loads(after[0]), json.loads(before[0])
    assert head["task"].pop("template_code_sha256") == template_code_digest(TINY_TEMPLATE) and head == old
    assert ReplayTarget(ReplaySettings()).load_tasks(MeasuredModel(path=path))[0][0].space.size == 8
    main(["space", "migrate", "--repo", str(repo), path])
    assert capsys.readouterr().out == f"{path}: has template_code_sha256 already\n"


def test_an_unproven_or_changed_template_is_refused_in_one_line(repo, tmp_path, capsys):
    commit = _commit(repo, BEFORE)
    wrong = _old_file(str(tmp_path / "wrong.jsonl"), commit, BEFORE + b"# another version\n")
    changed_code = BEFORE.replace(b"from __future__ import annotations\n", b"from __future__ import annotations\nX = 1\n")
    changed = _old_file(str(tmp_path / "changed.jsonl"), _commit(repo, changed_code), changed_code)
    unknown = _old_file(str(tmp_path / "unknown.jsonl"), "0" * 40, BEFORE)
    for path, says in ((wrong, "is not the template it records"), (changed, "changed since commit"),
                       (unknown, "has no src/targets/tvm/templates/cpu_packed.py at the recorded commit")):
        written = open(path, "rb").read()
        code, err = _main(["space", "migrate", "--repo", str(repo), path], capsys)
        assert code == 2 and len(err) == 1 and err[0].startswith(f"error: {path}: ") and says in err[0], err
        assert open(path, "rb").read() == written
    ok = _old_file(str(tmp_path / "ok.jsonl"), commit, BEFORE)
    written = open(ok, "rb").read()
    code, err = _main(["space", "migrate", "--repo", str(repo), ok, changed], capsys)  # all checked, then written
    assert code == 2 and "changed since commit" in err[0] and open(ok, "rb").read() == written
    code, err = _main(["space", "migrate", "--repo", str(tmp_path / "nowhere"), ok], capsys)
    assert code == 2 and err == [f"error: --repo {tmp_path / 'nowhere'}: not a git checkout of tunebench (give "
                                 "--repo <a clone of tunebench>)"]
