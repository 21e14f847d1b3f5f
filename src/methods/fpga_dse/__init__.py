"""Design-space exploration of FPGA accelerators (HLS directives; ``target=table``, ``fpga_open``,
``vivado``), multi-objective and multi-fidelity: the baselines ANN and boosted trees ([Sun-PhD] §3.6.3),
DAC19 ([DAC19]), NSGA-II and MOTPE through Optuna ([NSGA-II], [MOTPE], [Optuna]) here, the multi-fidelity
GP BO methods (cgp, dcgp, fpl18, mes; [Sun-PhD] Ch. 3) in ``mfgp/``."""
