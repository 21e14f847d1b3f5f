"""Turn a candidate (knob config or schedule trace) of a task into a scheduled IRModule, or give a task
TVM's default schedule (what ``tvm.compile`` makes of it without tuning)."""

from __future__ import annotations

import json

from tunebench.search_space import Config, TraceConfig


def trace_of(config: Config | TraceConfig) -> str | None:
    """The schedule trace of a candidate given as one, else None (a knob config: its ``index``)."""
    return config.trace if isinstance(config, TraceConfig) else None


def apply_trace(mod, trace_json: str):
    """Replay a trace (JSON text, see :func:`tunebench.search_space.trace_to_json`) on ``mod``'s PrimFunc."""
    import tvm

    sch = tvm.s_tir.Schedule(mod)
    tvm.s_tir.schedule.Trace.apply_json_to_schedule(json.loads(trace_json), sch)
    return sch.mod


def schedule(mod, task_kind: str, target_kind: str, config: Config | TraceConfig, template=None,
             variant: str | None = None):
    """The scheduled module of ``config`` for the task ``mod`` of kind ``task_kind`` on ``target_kind``.

    Knob configs go through the task kind's template of ``variant`` (None: the default; ``template``
    may be passed to reuse one); traces are replayed as they are.
    """
    if isinstance(config, TraceConfig):
        return apply_trace(mod, config.trace)
    if template is None:
        from tunebench.targets.tvm.templates import get_template

        template = get_template(task_kind, target_kind, variant)
    return template.apply(mod, config)


def default_schedule(mod, target):
    """What ``tvm.compile`` gives ``mod``'s unscheduled PrimFuncs on ``target`` (a TVM target or its dict): on
    a GPU target (TVM's ``gpu`` key) dlight's default schedules, as the compile pipeline applies them;
    elsewhere ``mod`` as it is (LLVM lowers the default loop nests). Used for the whole default build and for
    one task's default kernel (the end-to-end step's kernel choice)."""
    import tvm

    from tunebench.targets.tvm.workloads.relax_import import default_gpu_schedule

    tgt = tvm.target.Target(target)
    return default_gpu_schedule(mod, tgt) if "gpu" in tgt.keys else mod
