"""``python -m tunebench space migrate FILE [...] [--repo DIR]``: give space files measured before the template
code digest existed (their header's task has only ``template_sha256``, the whole template file's sha256) the
``template_code_sha256`` that replay checks now (:mod:`tunebench.targets.tvm.template_files`).

Proven, not assumed: the template file as it was at the commit the space file records (``git show
<commit>:<package folder>/<template_file>`` in the tunebench checkout ``--repo``, default the one this
tunebench runs from) must have the recorded ``template_sha256``; its code digest is the new field, and it
must equal this checkout's template's, else the template's code changed since and the file must be
re-measured. Only the header changes (``template_sha256`` is kept); the measured lines are written back as
they were. Every file is checked before any is written; a refused one is one ``error:`` line, exit 2,
nothing written. A file that has the field already is left as it is; shipped files (``data/``, checked
against their ``SHA256SUMS``) are not rewritten.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess

from tunebench.errors import UserError


def add_migrate_parser(sub) -> None:
    parser = sub.add_parser("migrate", help="add the template code digest to space files measured before it existed",
                            description="add template_code_sha256 to space files that record only template_sha256, "
                                        "computed from the template at the commit each file records")
    parser.add_argument("--repo", default=None,
                        help="a git checkout of tunebench holding the recorded commits (default: this tunebench's)")
    parser.add_argument("files", nargs="+", metavar="FILE", help="space files (.jsonl or .jsonl.gz)")


def git_checkout(repo: str | None) -> tuple[str, str]:
    """The git checkout to read old templates from and the package folder's path in it (``src/``)."""
    from tunebench.targets.tvm.template_files import PACKAGE_ROOT

    where = repo or PACKAGE_ROOT
    git = subprocess.run(["git", "-C", where, "rev-parse", "--show-toplevel"], capture_output=True, text=True)
    if git.returncode != 0 or not os.path.isdir(where):
        raise UserError(f"--repo {where}: not a git checkout of tunebench (give --repo <a clone of tunebench>)")
    top = git.stdout.strip()
    if repo is None:
        return top, os.path.relpath(PACKAGE_ROOT, top).replace(os.sep, "/") + "/"
    return top, "src/"


def template_at(top: str, commit: str, path: str, file: str) -> bytes:
    """The bytes of ``path`` at ``commit`` in the checkout ``top`` (``git show``); a UserError naming ``file``
    where the checkout has no such file at that commit."""
    show = subprocess.run(["git", "-C", top, "show", f"{commit}:{path}"], capture_output=True)
    if show.returncode != 0:
        raise UserError(f"{file}: the checkout {top} has no {path} at the recorded commit {commit} "
                        "(give --repo <a clone of tunebench that has it>)")
    return show.stdout


def migrated_header(file: str, head: dict, top: str, prefix: str) -> dict | None:
    """``head`` with ``template_code_sha256`` added (module docstring); None when it has it already.

    Raises:
        UserError: no commit or template recorded; the template at that commit is not the recorded one;
            its code differs from this checkout's.
    """
    from tunebench.targets.tvm.template_files import code_digest, template_code_digest

    task = head["task"]
    if task.get("template_code_sha256"):
        return None
    rel, recorded, commit = task.get("template_file"), task.get("template_sha256"), head.get("commit")
    if not (rel and recorded and isinstance(commit, str) and commit):
        raise UserError(f"{file}: records no template file, template_sha256 or commit: nothing to prove the "
                        "template's code by (re-measure it)")
    source = template_at(top, commit, prefix + rel, file)
    if hashlib.sha256(source).hexdigest() != recorded:
        raise UserError(f"{file}: {prefix}{rel} at commit {commit[:12]} is not the template it records (sha256 "
                        f"{recorded[:12]}): cannot prove which code measured it (re-measure it)")
    code, now = code_digest(source), template_code_digest(rel)
    if code != now:
        raise UserError(f"{file}: the code of {rel} changed since commit {commit[:12]} (code sha256 {code[:12]}, "
                        f"this checkout's {str(now)[:12]}): its configs would not build the kernels that were "
                        "timed; re-measure it (python -m tunebench space measure)")
    items = list(task.items())
    at = [k for k, _ in items].index("template_sha256") + 1
    return {**head, "task": dict([*items[:at], ("template_code_sha256", code), *items[at:]])}


def cmd_migrate(args: argparse.Namespace) -> None:
    """Check every file, then rewrite those that need it (whole or not at all); prints what it did."""
    from tunebench.datasets.shipped import expected_sha256
    from tunebench.datasets.space_file import space_file_lines, write_space_file

    top, prefix = git_checkout(args.repo)
    plans = []
    for file in args.files:
        try:
            head, rows = space_file_lines(file)
        except UserError as exc:  # the reader names the file as model.path=
            raise UserError(str(exc).removeprefix("model.path=")) from None
        new = migrated_header(file, head, top, prefix)
        if new is not None and expected_sha256(file) is not None:
            raise UserError(f"{file}: a shipped file (checked against its SHA256SUMS): not rewritten")
        plans.append((file, new, rows))
    for file, new, rows in plans:
        if new is None:
            print(f"{file}: has template_code_sha256 already", flush=True)
            continue
        write_space_file(file, {k: v for k, v in new.items() if k not in ("format", "version", "configs")}, rows)
        print(f"{file}: template_code_sha256 {new['task']['template_code_sha256'][:12]} added", flush=True)
