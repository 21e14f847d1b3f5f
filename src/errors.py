"""The one exception type that reaches the user as a one-line message."""


class UserError(Exception):
    """Bad input or a missing resource: printed as one line (``error: ...``), exit code 2.

    The message names the bad value and what is valid.
    """


class TrackingOutage(Exception):
    """The MLflow tracking server went down during a run and was still down at its end: printed as
    one line (``error: ...``), exit code 1.

    Nothing measured is lost (the record file is complete); the message names the server, since
    when it is down, where the undelivered tracking calls are spooled, and the ``resume=<run id>``
    command that delivers them.
    """


class DeviceUnavailable(Exception):
    """The measuring device went away during a run and no other came free in time (a remote device
    of ``target.rpc``): printed as one line (``error: ...``), exit code 1. The run is FAILED with every
    measurement kept; ``resume=<run id>`` continues it once a device is back.
    """


class RunStopped(KeyboardInterrupt):
    """A run stopped by a signal (SIGINT: Ctrl-C; SIGTERM): printed as one line that names the run and
    the ``resume=<run id>`` command that continues it; exit code 128 + the signal's number.

    A :class:`KeyboardInterrupt`, never an ``Exception``: no handler of failed measurements or builds
    mistakes a stop for one of those, and code that handles Ctrl-C handles it too.
    """

    def __init__(self, signum: int, message: str = "", run_id: str | None = None):
        import signal

        self.signum = int(signum)
        self.signal_name = signal.Signals(self.signum).name
        self.run_id = run_id  # the run it stopped (None: stopped before a run existed)
        super().__init__(message or f"stopped by {self.signal_name}")

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


class E2EError(RuntimeError):
    """A run step after the tuning failed (a whole-model build or run of the end-to-end step, say): one-line
    message naming the model and the build. The run is FAILED once its files are written; its records and
    task results are kept."""
