"""Small PyTorch models on one thread: the methods' networks and GPs (DGP, mapspace_bo's GP, FlexTensor's
Q-network) work on matrices of a few hundred rows, where a second thread only adds synchronization. On
the 2-core project machine one thread was 6x faster per DGP Adam step (70 vs 434 ms) and a GP fit took
2 s against 15 s on two threads, while other jobs shared the cores."""

from __future__ import annotations

import contextlib

import torch


@contextlib.contextmanager
def one_thread():
    """``torch.set_num_threads(1)`` inside, the previous setting restored after; also a decorator
    (``@one_thread()``)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)
