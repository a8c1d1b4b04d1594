"""The preflight phase and its judgement of what every node answered."""
