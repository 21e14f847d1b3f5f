"""FPGA targets (``fpga_open``, ``vivado``, ``table``) and what they are built on: the kernels and their
directive spaces, the Amaranth generator, the Yosys/nextpnr and Vitis HLS/Vivado tool flows, the
design-space tables and their assembly."""
