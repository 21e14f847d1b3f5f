"""docs/KNOBS.md is what the settings classes declare (regenerate it with
``python -m tunebench knobs --out docs/KNOBS.md``), and every knob says what it is."""

import os

from conftest import ROOT
from tunebench.config.knobs import knob_docs
from tunebench.harness.commands.knobs import knobs_markdown
from tunebench.harness.setup.store import registered_options


def test_the_knob_reference_is_current():
    with open(os.path.join(ROOT, "docs", "KNOBS.md")) as fh:
        assert fh.read() == knobs_markdown(), "run: python -m tunebench knobs --out docs/KNOBS.md"


def test_every_knob_is_documented():
    from tunebench.config.experiment import ExperimentConfig

    classes = {ExperimentConfig} | {n if isinstance(n, type) else type(n) for opts in registered_options().values()
                                    for n in opts.values()}
    missing = [f"{cls.__name__}.{key}" for cls in classes for key, _, _, doc in knob_docs(cls) if not doc.strip()]
    assert not missing, missing
