"""The postflight phase: judge a finished run from the files in its run folder alone."""
