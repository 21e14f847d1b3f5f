"""TVM targets (``llvm``, ``cuda``): the target, its build/run worker handler, the timing protocol,
the schedule templates and the function that applies a config to a task."""
