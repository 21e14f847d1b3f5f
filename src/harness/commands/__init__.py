"""The subcommands of ``python -m tunebench`` that live in the harness: command-line glue
(:mod:`.cli`), GAT's dataset and training (:mod:`.gat`), assembling an FPGA design-space table
(:mod:`.assemble_table`), the knob reference (:mod:`.knobs`). A backend's own commands live in its
package (``rpc``: :mod:`tunebench.targets.tvm.rpc_fleet`)."""
