"""What tests and users check methods with: the fake target (``fakes``), the method conformance suite
(``conformance``, a pytest module; ``python -m tunebench check-method``) and its cases."""
