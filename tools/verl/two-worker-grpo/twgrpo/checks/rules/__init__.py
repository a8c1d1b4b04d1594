"""Rules that need no cluster: the job's request, the profile's sizes and its EXTRA_OVERRIDES."""
