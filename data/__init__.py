"""Shipped data (FPGA design-space tables), package data of tunebench (tunebench.resources.data_dir)."""
