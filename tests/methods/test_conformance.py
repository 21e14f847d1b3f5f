"""The method conformance suite (:mod:`tunebench.testing.conformance`) on every registered method."""

from tunebench.testing.conformance import *  # noqa: F403 (pytest collects the suite's tests and fixtures)
