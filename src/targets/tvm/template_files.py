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
(``template_sha256``, :func:`template_source_digest`) and are checked by that.
"""

from __future__ import annotations

import ast
import hashlib
import inspect
import os

#: the tunebench package's folder: template files are named relative to it
PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


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
