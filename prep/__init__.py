"""What the operator runs on the prep box: input preparation and pinning, the bundle's hash
chain, install and Driver command. Standard library only, like the bundle it serves."""
