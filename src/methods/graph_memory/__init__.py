"""Memory-aware scheduling of a graph's execution order (``target=memory``: the peak memory of the
activations): SERENITY ([Ahn-PhD] Ch. 3), HMCOS ([Wang-DAC22]) and the scheduling baselines (``method``)."""
