"""make compare's defaults, in a module of their own so the command line can name them in its
help without importing the comparison (most of report/) on every start."""

COMPARE_FOLDER = "two-worker-grpo-compare"  # beside runs/verl/two-worker-grpo/, never in it
DEFAULT_TOLERANCE = 0.05  # a metric's end value may differ by this much, relatively
