"""The Hydra config tree, shipped as package data (tunebench.resources.conf_dir)."""
