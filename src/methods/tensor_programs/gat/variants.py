"""The GAT network's variants and graph layers ([Sun-PhD] Tables 5.1-5.2), named below both the settings
and the network, so that the settings can check a checkpoint against the network without an import cycle."""

VARIANTS = ("gat", "mhsa", "gnn_mlp")
GRAPH_LAYERS = ("graphconv", "gcn", "gat", "sage")
