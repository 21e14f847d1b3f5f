"""``method=flextensor``: FlexTensor's exploration ([Zheng-ASPLOS20] §5.1): simulated-annealing start
points and a Q-network choosing the direction of the next move in a rearranged space."""
