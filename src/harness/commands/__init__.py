"""The subcommands of ``python -m tunebench`` that live in the harness: command-line glue
(:mod:`.cli`), GAT's dataset and training (:mod:`.gat`), assembling an FPGA design-space table
(:mod:`.assemble_table`), a local TVM RPC fleet (:mod:`.rpc_fleet`), the knob reference (:mod:`.knobs`)."""
