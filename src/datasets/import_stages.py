"""The stages of a model's import, each of whose failures is one line naming the model, the stage and
the first cause (:func:`stage`), and the bound that keeps a model's tensors within this machine's memory
(:func:`check_bytes`), checked before anything of that size is allocated.

A user's model (``model=torch``, ``model=onnx``) is imported in the preflight: the stages are, for an
ONNX file, the ONNX checker, shape inference, the size bound, constant folding and a trial run (ONNX
Runtime), the Relax import, fusion and task extraction; for a PyTorch module, the size of its input,
``torch.export`` (a trial forward on fake tensors of the declared shape: nothing is allocated), the size
bound on every tensor the export traced, a trial forward, the Relax import, fusion and task extraction.
"""

from __future__ import annotations

import contextlib
import io
import math
from collections.abc import Iterable, Iterator

from tunebench.datasets.layer_spec import MEMORY_SHARE, available_bytes
from tunebench.errors import UserError

#: exception class name -> what it means for a user's model (added to the first cause)
HINTS = {
    "GuardOnDataDependentSymNode": "forward branches on the input's values, which torch.export cannot trace; "
                                   "make the branch a torch.cond or remove it",
}


def first_cause(exc: BaseException) -> str:
    """``Type: first line of the message`` of ``exc`` (of its cause where its own message is empty)."""
    while not str(exc).strip() and exc.__cause__ is not None:
        exc = exc.__cause__
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip() and not ln.startswith("Traceback")]
    text = f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__
    hint = HINTS.get(type(exc).__name__)
    return f"{text} ({hint})" if hint else text


@contextlib.contextmanager
def stage(label: str | None, name: str) -> Iterator[None]:
    """Run one import stage of a user's model: any failure but a :class:`UserError` (already one line)
    becomes ``UserError("<label>: <name> failed: <first cause>")``. What the stage prints to stderr
    (torch.export dumps the traced graph of a failure there) is dropped: the line says what went wrong.
    ``label`` None (the project's own models): nothing is caught."""
    if label is None:
        yield
        return
    try:
        with contextlib.redirect_stderr(io.StringIO()):
            yield
    except UserError:
        raise
    except Exception as exc:  # the model's code or an importer: any error of it is the model's
        raise UserError(f"{label}: {name} failed: {first_cause(exc)}") from None


def memory_limit() -> int:
    """Bytes a model's tensors may take: :data:`MEMORY_SHARE` of the memory this machine has available."""
    return int(MEMORY_SHARE * available_bytes())


def tensor_bytes(shapes: Iterable[tuple[Iterable[int], int]]) -> int:
    """Bytes of tensors given as ``(shape, bytes per element)``."""
    return sum(math.prod(int(d) for d in shape) * size for shape, size in shapes)


def check_bytes(label: str | None, what: str, need: int) -> None:
    """Refuse ``need`` bytes of ``what`` beyond :func:`memory_limit`, before they are allocated.

    Raises:
        UserError: one line with the size, the limit and the machine's available memory.
    """
    limit = memory_limit()
    if need > limit:
        raise UserError(f"{label or 'model'}: {what}: {need / 1e9:.3g} GB; at most {limit / 1e9:.3g} GB fit "
                        f"({MEMORY_SHARE:.0%} of the {available_bytes() / 1e9:.3g} GB this machine has available: "
                        "the reference, the builds and the baselines copy them)")
