"""TVM targets (``llvm``, ``cuda``): the target, its build/run worker handler, its kernel timing
(the measurement protocol on TVM), the schedule templates and the function that applies a config to a task."""
