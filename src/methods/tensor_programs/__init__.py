"""Tuning tensor programs: the schedule of one operator (a conv2d, a dense layer) in a TVM target's template
space, or one MetaSchedule makes (``target=llvm``, ``target=cuda``, ``target=replay``). The methods, each
under its paper's name: ``autotvm/`` ([AutoTVM]), ``chameleon/`` (on AutoTVM's cost model), ``flextensor/``,
``dgp/`` (deep GP transfer), ``glimpse/`` (hardware-spec-aware tuning), ``gat/`` (GTuner: MetaSchedule with the
GAT cost model) and ``metaschedule``. The commands of the family (``dataset build``, ``gat train``,
``glimpse train``) live with the method they serve (``gat/commands.py``, ``glimpse/commands.py``)."""
