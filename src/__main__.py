"""``python -m tunebench <command> [options]``: tools that work on recorded runs.

Commands live in :data:`COMMANDS` (name -> help, option builder, runner); add one there to get a new
subcommand. Bad input ends with one line ``error: ...`` on stderr and exit code 2.
"""

from __future__ import annotations

import argparse
import sys

from tunebench.errors import RunStopped, UserError
from tunebench.harness.commands.cli import fail, stopped


def _leaderboard_options(parser: argparse.ArgumentParser) -> None:
    from tunebench.report.cli import add_arguments

    add_arguments(parser)


def _leaderboard(args: argparse.Namespace) -> None:
    from tunebench.report.cli import run_leaderboard

    print(run_leaderboard(args), flush=True)


# a method family's commands live with the family (the tensor programs': GAT's and Glimpse's training), as a
# backend's live with its target (rpc); each is given the MLflow tracking of its --workdir


def _dataset_options(parser: argparse.ArgumentParser) -> None:
    from tunebench.methods.tensor_programs.gat.commands import add_build_options

    add_build_options(parser)


def _dataset(args: argparse.Namespace) -> None:
    from tunebench.harness.commands.cli import command_tracking
    from tunebench.methods.tensor_programs.gat.commands import cmd_build

    cmd_build(args, command_tracking(args.workdir))


def _gat_options(parser: argparse.ArgumentParser) -> None:
    from tunebench.methods.tensor_programs.gat.commands import add_train_options

    add_train_options(parser)


def _gat(args: argparse.Namespace) -> None:
    from tunebench.harness.commands.cli import command_tracking
    from tunebench.methods.tensor_programs.gat.commands import cmd_train

    cmd_train(args, command_tracking(args.workdir))


def _glimpse_options(parser: argparse.ArgumentParser) -> None:
    from tunebench.methods.tensor_programs.glimpse.commands import add_options

    add_options(parser)


def _glimpse(args: argparse.Namespace) -> None:
    from tunebench.harness.commands.cli import command_tracking
    from tunebench.methods.tensor_programs.glimpse.commands import cmd_train

    cmd_train(args, command_tracking(args.workdir))


def _server_options(parser: argparse.ArgumentParser) -> None:
    from tunebench.harness.tracking.server import add_server_options

    add_server_options(parser)


def _server(args: argparse.Namespace) -> None:
    from tunebench.harness.tracking.server import cmd_server

    cmd_server(args)


def _knobs_options(parser: argparse.ArgumentParser) -> None:
    from tunebench.harness.commands.knobs import add_options

    add_options(parser)


def _knobs(args: argparse.Namespace) -> None:
    from tunebench.harness.commands.knobs import cmd_knobs

    cmd_knobs(args)


def _rpc_options(parser: argparse.ArgumentParser) -> None:
    from tunebench.targets.tvm.rpc_fleet import add_fleet_options

    add_fleet_options(parser)


def _rpc(args: argparse.Namespace) -> None:
    from tunebench.targets.tvm.rpc_fleet import cmd_fleet

    cmd_fleet(args)


def _check_method_options(parser: argparse.ArgumentParser) -> None:
    from tunebench.harness.commands.check_method import add_options

    add_options(parser)


def _check_method(args: argparse.Namespace) -> None:
    from tunebench.harness.commands.check_method import cmd_check_method

    code = cmd_check_method(args)
    if code:
        raise SystemExit(code)


def _space_options(parser: argparse.ArgumentParser) -> None:
    from tunebench.harness.commands.space import add_options

    add_options(parser)


def _space(args: argparse.Namespace) -> None:
    from tunebench.harness.commands.space import cmd_measure

    cmd_measure(args)


def _suite_options(parser: argparse.ArgumentParser) -> None:
    from tunebench.report.suite import add_options

    add_options(parser)


def _suite(args: argparse.Namespace) -> None:
    from tunebench.report.suite import cmd_suite

    cmd_suite(args)


COMMANDS = {
    "leaderboard": ("tables (Markdown, CSV; --html: one HTML page) and best-so-far plots from the FINISHED "
                    "MLflow runs",
                    _leaderboard_options, _leaderboard),
    "dataset": ("build a GAT training set from record folders / run ids: dataset build --records ... --out set.pt",
                _dataset_options, _dataset),
    "gat": ("train the GAT cost model: gat train --dataset set.pt --out model.pt", _gat_options, _gat),
    "glimpse": ("train Glimpse's Blueprint prior, acquisition and validity ensemble: glimpse train --records ... "
                "--out model.pt", _glimpse_options, _glimpse),
    "server": ("an MLflow tracking server on PostgreSQL: server start [--host 127.0.0.1 --port 5000 --data DIR] "
               "| server stop [--data DIR]", _server_options, _server),
    "rpc": ("a TVM RPC tracker and RPC servers on this machine, for target.rpc: rpc [--servers 2 --key cpu "
            "--host 127.0.0.1 --port 9190]; Ctrl-C stops them", _rpc_options, _rpc),
    "check-method": ("the method conformance suite on your method: check-method package.module:Class "
                     "(docs/USAGE.md §Your own method)", _check_method_options, _check_method),
    "space": ("measure a model's task spaces into versioned files for target=replay: space measure --out DIR "
              "[--sample N] [--max-factor F] model=... target=llvm | space merge --out FILE A B ...", _space_options, _space),
    "suite": ("score methods on a set of measured spaces, N seeds at a fixed budget, replayed: suite {cpu,gpu,all} | "
              "--spaces FILE... [--methods random,autotvm] [--seeds 5] [--budget 100] [--jobs 1]",
              _suite_options, _suite),
    "knobs": ("every knob of every config group, from the settings classes (docs/KNOBS.md): knobs [--out FILE]",
              _knobs_options, _knobs),
}


class _Parser(argparse.ArgumentParser):
    """argparse whose errors are one line (``error: ...``, exit 2) instead of usage + message."""

    def error(self, message: str) -> None:  # type: ignore[override]
        fail(f"{self.prog}: {message}")


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser of every command; with ``command``, only that command's options are added ("": none), so
    that the other commands' modules, some of which import every method, stay unimported and a command
    starts in a fraction of a second."""
    parser = _Parser(prog="python -m tunebench", description="tunebench tools that work on recorded runs")
    sub = parser.add_subparsers(dest="command", metavar="command", parser_class=_Parser)
    for name, (help_text, add_options, _run) in COMMANDS.items():
        command_parser = sub.add_parser(name, help=help_text, description=help_text)
        if command in (None, name):
            add_options(command_parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    valid = ", ".join(COMMANDS)
    if not argv:
        fail(f"no command given; valid: {valid} (python -m tunebench <command> -h for its options)")
    if not argv[0].startswith("-") and argv[0] not in COMMANDS:
        fail(f"unknown command {argv[0]!r}; valid: {valid}")
    args = build_parser("" if argv[0].startswith("-") else argv[0]).parse_args(argv)  # "-h": no command's options
    try:
        COMMANDS[args.command][2](args)
    except UserError as exc:
        fail(str(exc))
    except RunStopped as exc:  # a command's MLflow run stopped by a signal (KILLED): one line
        stopped(exc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
