"""Checkpoint shards: their archives, checked in parallel, on every node, and the snapshot a resumed run trains from."""
