"""The end-to-end step's errors (importable without TVM or PyTorch: the driver catches them)."""


class E2EError(RuntimeError):
    """A whole-model build or run failed (one-line message naming the model and the build)."""


class E2EMismatch(E2EError):
    """A whole-model build computes a different output than PyTorch (beyond the tolerance)."""
