"""The template code digest that space files are checked by (``template_code_sha256``): it leaves out the
lines that import tunebench's own modules, and nothing else (a changed code line, a changed import of another
package or of a sibling template module, a docstring that mentions an import all change it)."""

from __future__ import annotations

import glob
import hashlib
import os

import pytest

from tunebench.targets.tvm.template_files import PACKAGE_ROOT, code_digest, template_code_digest

SOURCE = b'''"""A template.

    from tunebench.search_space import Space   (an example in a docstring)
"""

import numpy as np
from tvm import te
import tunebench.search_space as sp
from tunebench.search_space import Config, Space  # knobs

from .fused import Template


class Tpl(Template):
    def make_space(self):
        from tunebench.search_space import SplitKnob
        import os; import tunebench.search_space
        return Space([SplitKnob("x", 8, 2)])
'''


def _edited(old: bytes, new: bytes) -> bytes:
    assert SOURCE.count(old) == 1
    return SOURCE.replace(old, new)


@pytest.mark.parametrize("old,new", [
    (b"import tunebench.search_space as sp\n", b"import tunebench.spaces.search as sp\n"),
    (b"from tunebench.search_space import Config, Space  # knobs",
     b"from tunebench.spaces.search import Config, Space"),
    (b"        from tunebench.search_space import SplitKnob\n",
     b"        from tunebench.spaces.search import SplitKnob\n"),
    (b"from tunebench.search_space import Config, Space  # knobs\n",
     b"from tunebench.spaces.search import (\n    Config,\n    Space,\n)\n"),
    (b"from tunebench.search_space import Config, Space  # knobs\n", b""),
])
def test_a_changed_tunebench_import_line_leaves_the_digest_as_it_was(old, new):
    assert code_digest(_edited(old, new)) == code_digest(SOURCE)


@pytest.mark.parametrize("old,new", [
    (b'SplitKnob("x", 8, 2)', b'SplitKnob("x", 8, 3)'),  # code
    (b"from tvm import te\n", b"from tvm import tir as te\n"),  # another package's import
    (b"import numpy as np\n", b"import numpy as np  # arrays\n"),
    (b"from .fused import Template\n", b"from .cpu import Template\n"),  # a sibling template module
    # not alone on its line
    (b"import os; import tunebench.search_space\n", b"import os; import tunebench.spaces.search\n"),
    (b"    from tunebench.search_space import Space   (an", b"    from tunebench.spaces.search import Space   (an"),
])
def test_any_other_change_changes_the_digest(old, new):
    assert code_digest(_edited(old, new)) != code_digest(SOURCE)


def test_a_file_that_does_not_parse_is_hashed_whole():
    broken = SOURCE + b"def (\n"
    assert code_digest(broken) == hashlib.sha256(broken).hexdigest()


def test_every_template_file_imports_tunebench_on_lines_the_digest_leaves_out():
    """The template files import tunebench's modules in single-line statements at the top of the file; moving
    those modules (another name on each such line) leaves every file's code digest as it was."""
    files = sorted(glob.glob(os.path.join(PACKAGE_ROOT, "targets", "tvm", "templates", "*.py")))
    assert len(files) >= 10
    moved = 0
    for path in files:
        raw = open(path, "rb").read()
        lines = raw.splitlines(keepends=True)
        assert not [ln for ln in lines if ln.lstrip().startswith((b"from tunebench", b"import tunebench"))
                    and ln.rstrip().endswith((b"(", b"\\"))], path
        edited = b"".join(ln.replace(b"tunebench.", b"tunebench.moved_", 1)
                          if ln.startswith((b"from tunebench.", b"import tunebench.")) else ln for ln in lines)
        moved += edited != raw
        assert code_digest(edited) == template_code_digest(os.path.relpath(path, PACKAGE_ROOT)), path
    assert moved >= 9


def test_each_known_template_version_is_the_file_at_the_commit_the_shipped_spaces_record():
    """:data:`KNOWN_SOURCES`, derived again: each shipped space's template file as ``git show`` gives it at the
    commit the space records has the recorded whole-file sha256 and the listed code digest (skipped where the
    checkout has no git history, e.g. an installed package or a shallow clone)."""
    from tunebench.datasets.shipped import space_set
    from tunebench.datasets.space_file import read_measured
    from tunebench.errors import UserError
    from tunebench.harness.commands.space_migrate import git_checkout, template_at
    from tunebench.targets.tvm.template_files import KNOWN_SOURCES

    checked = set()
    for path in space_set("cpu"):
        meta = read_measured(path).meta
        rel, whole = meta["task"]["template_file"], meta["task"]["template_sha256"]
        try:
            top, prefix = git_checkout(None)
            old = template_at(top, meta["commit"], prefix + rel, path)
        except (OSError, UserError) as exc:
            pytest.skip(f"no git history with commit {meta['commit'][:7]} here: {exc}")
        assert hashlib.sha256(old).hexdigest() == whole and code_digest(old) == KNOWN_SOURCES[whole], path
        checked.add(whole)
    assert checked == set(KNOWN_SOURCES)
