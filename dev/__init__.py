"""What developers and tests use: smoke-only input synthesis, the smoke run, a Ray head helper
and the sandbox install. Never installed on the volume, never run on the prep box."""
