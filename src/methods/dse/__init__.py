"""FPGA design-space exploration baselines: ANN and boosted trees ([Sun-PhD] §3.6.3), DAC19 ([DAC19]),
NSGA-II and MOTPE through Optuna ([NSGA-II], [MOTPE], [Optuna])."""
