"""The end-to-end step's own error (importable without TVM or PyTorch); the failure of a step is
:class:`tunebench.errors.E2EError`."""

from tunebench.errors import E2EError


class E2EMismatch(E2EError):
    """A whole-model build computes a different output than PyTorch (beyond the tolerance)."""
