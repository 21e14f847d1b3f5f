"""The source file that defines a template, and its sha256: a measured space records both, and replay
refuses a space whose template's source changed since (its configs would build other kernels). No TVM
import, so that replay stays fast."""

from __future__ import annotations

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


def template_source_digest(rel: str) -> str | None:
    """The sha256 (hex) of the package's file ``rel``; None when there is no such file."""
    path = os.path.join(PACKAGE_ROOT, *rel.split("/"))
    if ".." in rel.split("/") or not os.path.isfile(path):
        return None
    with open(path, "rb") as fh:
        return hashlib.sha256(fh.read()).hexdigest()
