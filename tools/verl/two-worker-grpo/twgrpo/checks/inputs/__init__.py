"""The inputs phase: the verl checkout, model, data and reward file against the profile's pins."""
