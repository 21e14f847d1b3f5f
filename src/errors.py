"""The one exception type that reaches the user as a one-line message."""


class UserError(Exception):
    """Bad input or a missing resource: printed as one line (``error: ...``), exit code 2.

    The message names the bad value and what is valid.
    """
