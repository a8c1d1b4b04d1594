"""Preflight's rounds across the cluster, sent from the Driver: a Ray task on every node, with one bounded wait (cluster.py), for reachability, collectives, agents, storage, and the job's shape."""
