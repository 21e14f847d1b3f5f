"""Mapspace search on DNN accelerators: ``mapspace_bo`` ([Dinh-MLArchSys23]) and ZigZag's mappers."""
