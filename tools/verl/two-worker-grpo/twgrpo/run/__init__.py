"""The run model: the profile, findings and their catalog, the run folder's paths and records,
the training command and environment, a phase's verdict, and how values are said to people.

May import: formats/ and other modules of run/.
"""
