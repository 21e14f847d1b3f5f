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
