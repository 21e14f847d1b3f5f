"""The subcommands of ``python -m tunebench`` that live in the harness: command-line glue
(:mod:`.cli`), assembling an FPGA design-space table (:mod:`.assemble_table`), the knob reference
(:mod:`.knobs`), measuring spaces (:mod:`.space`), the conformance check of a user's method
(:mod:`.check_method`). A backend's own commands live in its package (``rpc``:
:mod:`tunebench.targets.tvm.rpc_fleet`), a method family's in the family (``dataset build``, ``gat train``:
:mod:`tunebench.methods.tensor_programs.gat.commands`; ``glimpse train``:
:mod:`tunebench.methods.tensor_programs.glimpse.commands`)."""
