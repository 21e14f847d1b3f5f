"""The source file that defines a template, and the sha256 of its code: a measured space records both, and
replay refuses a space whose template's code changed since (its configs would build other kernels). No TVM
import, so that replay stays fast.

The digest a space file is checked by (:func:`code_digest`, the header's ``template_code_sha256``) leaves
out the lines that import tunebench's own modules (``from tunebench.x import y``, ``import tunebench.x``).
The check guards the template's own code: it never covered the modules a template imports (a change inside
:mod:`tunebench.search_space` is in no digest of the template file), so leaving out the import lines loses
nothing the check had, and moving or renaming such a module does not invalidate measured spaces. Relative
imports (``from .fused import ...``, other template modules) and imports of other packages stay in the
digest. Space files measured before this digest existed record only the sha256 of the whole file
(``template_sha256``, :func:`template_source_digest`): such a file passes when that is this checkout's
file's, or when it names a template version in :data:`KNOWN_SOURCES` whose code digest is this checkout's
(the shipped spaces: their bytes, and so their task ids and seeded replays, stay as measured).
"""

from __future__ import annotations

import ast
import hashlib
import inspect
import os

#: the tunebench package's folder: template files are named relative to it
PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


#: template versions that space files name only by their whole file's sha256, with the code digest of that
#: version: whole-file sha256 -> code digest. Each is the file at the commit such a space file records, e.g.
#: ``git show e881afe:src/targets/tvm/templates/cpu_packed.py`` for the six shipped CPU spaces;
#: tests/targets/test_template_digest.py derives them again from git where the history is there.
KNOWN_SOURCES = {
    "0630d984f0d1e4dfe1528134837b4b1c99045f9826d11b6792e61065808a95ee":  # cpu_packed.py at e881afe
        "623bfa86a9ca5f38531bd6929d1bd489394b1dede6e6e3aeeb51784f0dab1662",
}


def template_file(template) -> str:
    """The module file of a template (class or instance), relative to the package
    (``targets/tvm/templates/cpu_packed.py``)."""
    cls = template if isinstance(template, type) else type(template)
    return os.path.relpath(inspect.getsourcefile(cls), PACKAGE_ROOT).replace(os.sep, "/")


def _read(rel: str) -> bytes | None:
    """The bytes of the package's file ``rel``; None when there is no such file."""
    path = os.path.join(PACKAGE_ROOT, *rel.split("/"))
    if ".." in rel.split("/") or not os.path.isfile(path):
        return None
    with open(path, "rb") as fh:
        return fh.read()


def template_source_digest(rel: str) -> str | None:
    """The sha256 (hex) of the whole package file ``rel`` (the header's ``template_sha256``); None when
    there is no such file."""
    source = _read(rel)
    return None if source is None else hashlib.sha256(source).hexdigest()


def whole_file_matches(rel: str, recorded: str) -> tuple[bool, str | None]:
    """Whether a space file that records only the whole template file's sha256 (``recorded``) was measured
    with this checkout's template code: the same file, or a known version of it (:data:`KNOWN_SOURCES`)
    with the same code digest. Also this checkout's whole-file sha256 (None: no such file), for a message."""
    now = template_source_digest(rel)
    if now is None or now == recorded:
        return now is not None, now
    return KNOWN_SOURCES.get(recorded) == template_code_digest(rel), now


def template_code_digest(rel: str) -> str | None:
    """:func:`code_digest` of the package file ``rel`` (the header's ``template_code_sha256``); None when
    there is no such file."""
    source = _read(rel)
    return None if source is None else code_digest(source)


def _is_tunebench(node: ast.AST) -> bool:
    """Whether ``node`` is an absolute import of tunebench's own modules (and of nothing else)."""
    def ours(name: str | None) -> bool:
        return name is not None and (name == "tunebench" or name.startswith("tunebench."))

    if isinstance(node, ast.ImportFrom):
        return node.level == 0 and ours(node.module)
    return isinstance(node, ast.Import) and all(ours(a.name) for a in node.names)


def code_digest(source: bytes) -> str:
    """The sha256 (hex) of a template file's bytes without the lines of its tunebench import statements
    (module docstring). A statement is left out only when its lines hold nothing else (``import os;
    import tunebench.x`` stays); a file that does not parse is hashed whole."""
    lines = source.splitlines(keepends=True)
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return hashlib.sha256(source).hexdigest()
    drop: set[int] = set()
    for node in ast.walk(tree):
        if not _is_tunebench(node):
            continue
        first, last = node.lineno - 1, node.end_lineno - 1
        before = lines[first][:node.col_offset]  # ast offsets are in UTF-8 bytes, as ``lines`` is
        after = lines[last][node.end_col_offset:].split(b"#")[0]
        if not before.strip() and not after.strip():
            drop.update(range(first, last + 1))
    return hashlib.sha256(b"".join(line for i, line in enumerate(lines) if i not in drop)).hexdigest()
