"""``python -m tunebench check-method package.module:Class``: the method conformance suite
(:mod:`tunebench.testing.conformance`, the rules every built-in method keeps) on a method from outside
tunebench. Runs pytest (the ``test`` extra); exit code 0 when the method keeps every rule."""

from __future__ import annotations

import argparse
import importlib.util
import os

from tunebench.errors import UserError

SUITE = "tunebench.testing.conformance"
METHOD_ENV = "TUNEBENCH_CHECK_METHOD"  # package.module:Class: the suite checks only that method


def add_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("cls", metavar="package.module:Class", help="the Method subclass to check")
    parser.add_argument("-k", dest="select", default=None, help="only the rules whose test names match (pytest -k)")


def cmd_check_method(args: argparse.Namespace) -> int:
    """Run the suite on ``args.cls``; returns pytest's exit code."""
    from tunebench.methods import load_method_class

    load_method_class(args.cls, "check-method")  # a bad path or an unusable class is one line, before pytest
    if importlib.util.find_spec("pytest") is None:
        raise UserError("check-method runs pytest, which is not installed: make install EXTRAS=test")
    import pytest

    os.environ[METHOD_ENV] = args.cls
    argv = [importlib.util.find_spec(SUITE).origin, "-q", "-p", "no:cacheprovider", "-c", os.devnull, "-o",
            "markers=slow: needs TVM's MetaSchedule (20-40 s to import)", "--rootdir", os.getcwd()]
    return int(pytest.main(argv + (["-k", args.select] if args.select else [])))
