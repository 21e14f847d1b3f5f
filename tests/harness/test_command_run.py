"""The MLflow run of a command (glimpse train, gat train, dataset build) never stays RUNNING: FINISHED when
its work is done, KILLED on SIGTERM or Ctrl-C (one line naming the command and the run), FAILED on an error."""

from __future__ import annotations

import os
import signal
import time

import pytest

from tunebench.errors import RunStopped
from tunebench.harness.tracking.command_run import command_run


class _Tracker:
    run_id = "r1"

    def __init__(self):
        self.calls = []

    def start(self, run_name, params, tags):
        self.calls.append(("start", run_name))

    def end(self, status="FINISHED"):
        self.calls.append(("end", status))


def test_the_run_ends_finished_when_the_work_is_done():
    tr = _Tracker()
    with command_run(tr, "train", {}, "glimpse train"):
        pass
    assert tr.calls == [("start", "train"), ("end", "FINISHED")]


def test_an_error_ends_the_run_failed_and_is_raised_unchanged():
    tr = _Tracker()
    with pytest.raises(ValueError, match="boom"), command_run(tr, "train", {}, "glimpse train"):
        raise ValueError("boom")
    assert tr.calls[-1] == ("end", "FAILED")


def test_sigterm_ends_the_run_killed_with_one_line_and_the_handler_is_restored():
    tr = _Tracker()
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(RunStopped) as info, command_run(tr, "train", {}, "glimpse train"):
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)  # the handler raises at once; never reached
    assert tr.calls[-1] == ("end", "KILLED")
    assert str(info.value) == ("glimpse train stopped by SIGTERM: MLflow run r1 KILLED, nothing written; run the "
                               "command again") and info.value.exit_code == 128 + signal.SIGTERM
    assert signal.getsignal(signal.SIGTERM) == before
