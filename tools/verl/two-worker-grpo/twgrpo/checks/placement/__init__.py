"""Rank placement: which process on which node held each rank, from the training log."""
