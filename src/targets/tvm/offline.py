"""What the TVM targets offer methods without a target built (:class:`~tunebench.targets.capabilities.ExtractsTasks`):
a model's tasks for the target kind and the template of a task, for training sets built offline from recorded
runs (GAT's data set, Glimpse's GPU validity labels). Nothing here probes a device."""

from __future__ import annotations


class OfflineTasks:
    """:class:`~tunebench.targets.capabilities.ExtractsTasks` for a TVM target class (its ``kind``)."""

    kind: str

    @classmethod
    def model_tasks(cls, model) -> list:
        """The tasks of ``model`` for :attr:`kind` (:func:`tunebench.targets.tvm.workloads.tasks.model_tasks`,
        cached in-process)."""
        from tunebench.targets.tvm.workloads.tasks import model_tasks

        return model_tasks(model, cls.kind)[0]

    @classmethod
    def task_template(cls, task, variant: str | None = None):
        """The template of ``task``'s kind on :attr:`kind` in ``variant`` (None: the default)."""
        from tunebench.targets.tvm.templates import get_template

        return get_template(task.kind, cls.kind, variant)
