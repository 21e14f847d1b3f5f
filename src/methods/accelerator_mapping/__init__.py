"""Mapping DNN layers onto an accelerator (``target=accel``): ``mapspace_bo`` ([Dinh-MLArchSys23]), Timeloop's
random-pruned mapper (``timeloop_random``, [Parashar-ISPASS19]) and ZigZag's mappers ``loma`` and ``salsa``
([Mei-TC21], [Jung-AICAS23]), through what the target lends."""


def objective_value(m) -> float:
    """The single objective a measurement reports (its only entry; TVM-like targets: latency)."""
    return float(next(iter(m.objectives.values()))) if m.objectives else float(m.latency_s)
