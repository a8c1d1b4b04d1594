"""The training watchdog and the evidence it gathers from every node."""
