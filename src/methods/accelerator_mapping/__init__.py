"""Mapping DNN layers onto an accelerator (``target=accel``): ``mapspace_bo`` ([Dinh-MLArchSys23]) and
ZigZag's mappers ``loma`` and ``salsa`` ([Mei-TC21], [Jung-AICAS23]), through what the target lends."""
