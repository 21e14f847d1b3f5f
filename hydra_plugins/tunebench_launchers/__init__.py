"""tunebench's Hydra launcher plugins (Hydra finds plugins in the ``hydra_plugins`` namespace)."""
