"""Where the Optuna methods (``nsga2``, ``motpe``) keep their study: in memory (the default), or in a
storage that several workers share (``method.storage``), so that their samplers learn from each
other's trials.

``method.storage`` takes an Optuna RDB URL (``postgresql://...``, ``postgresql+psycopg://...``,
``mysql://...``, ``sqlite:///path``) or ``journal:<path>`` (Optuna's journal file, no database). The
study of a task is named ``<method.study>-<task id>`` (default ``method.study``:
``tunebench-<method>``): workers whose runs have the same ``method.study`` and tune the same task ask
trials of one study; each worker measures what its trials propose and tells the results, and every
worker's sampler sees every finished trial. Give independent replications (seeds that must not see
each other) their own ``method.study``.

The storage is opened when the method is built, which the harness does while it checks a run's
config (for a sweep, in the driver, before any job starts): a database's schema is created there,
once, instead of by racing workers; an unreachable storage is a one-line error before any run exists.
"""

from __future__ import annotations

import os
import re
import time

from tunebench.errors import UserError

RDB = re.compile(r"^(postgresql|mysql|sqlite)(\+[a-z0-9_]+)?://")
VALID = "null, journal:<file>, or an Optuna RDB URL (postgresql://..., mysql://..., sqlite:///<file>)"


STUDY = re.compile(r"[A-Za-z0-9_.\-]{1,100}")


def storage_problem(value) -> str | None:
    """What is wrong with ``value`` as ``method.storage`` (its form), or None: a storage tunebench can open."""
    if value is None or isinstance(value, str) and (value.startswith("journal:") and len(value) > 8
                                                    or RDB.match(value)):
        return None
    return f"is not a storage; valid: {VALID}"


def journal_problem(value) -> str | None:
    """A journal file whose folder does not exist or is not writable (looks at the file system), or None."""
    if not (isinstance(value, str) and value.startswith("journal:")):
        return None
    folder = os.path.dirname(os.path.abspath(value[len("journal:"):]))
    if not os.path.isdir(folder) or not os.access(folder, os.W_OK):
        return f"folder {folder} does not exist or is not writable"
    return None


def study_problem(value) -> str | None:
    if value is None or isinstance(value, str) and STUDY.fullmatch(value):
        return None
    return "must be null or a name of letters, digits, '_', '.', '-'"


def open_storage(url: str, attempts: int = 5):
    """The Optuna storage of ``url`` (a journal file or an RDB, whose schema is created if missing).
    Two processes creating one schema at once collide (a unique key, or a table the other one created
    first): the loser tries again, and then finds the schema made."""
    import optuna
    from optuna.storages.journal import JournalFileBackend

    if url.startswith("journal:"):
        return optuna.storages.JournalStorage(JournalFileBackend(url[len("journal:"):]))
    for attempt in range(attempts):
        try:
            return optuna.storages.RDBStorage(url)
        except Exception as exc:
            if _lost_schema_race(exc) and attempt + 1 < attempts:
                time.sleep(0.2 * (attempt + 1))
                continue
            why = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise UserError(f"method.storage={_redact(url)}: cannot open the Optuna storage ({why[:300]})") from None


def _lost_schema_race(exc: Exception) -> bool:
    """Whether ``exc`` is another process creating the same schema at the same moment."""
    text = str(exc).lower()
    return "unique" in text or "already exists" in text or "duplicatetable" in text


def _redact(url: str) -> str:
    """``url`` without a password (``user:secret@`` -> ``user:***@``)."""
    return re.sub(r"(://[^:/@]+:)[^@]*@", r"\1***@", url)


def shared_study(storage, name: str, n_objectives: int, sampler):
    """The study ``name`` in ``storage`` (created by whoever comes first), with ``sampler``."""
    import optuna

    directions = ["minimize"] * n_objectives
    study = optuna.create_study(storage=storage, study_name=name, directions=directions, sampler=sampler,
                                load_if_exists=True)
    if len(study.directions) != n_objectives:
        raise UserError(f"method.study: study {name!r} in the storage has {len(study.directions)} objectives, "
                        f"this target {n_objectives}; give this run another method.study")
    return study
