"""``target=accel``: a Gemmini-like DNN accelerator through ZigZag's analytical cost model."""
