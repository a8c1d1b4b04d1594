"""The phases' checks, one room (a package) a phase; each check a small named function that
returns findings:

    inputs/      the inputs phase: verl checkout, model, data and reward file against the pins
    rules/       what needs no cluster: the job's request, the profile's sizes, EXTRA_OVERRIDES
    preflight/   the preflight phase and its judgement of what every node answered
    rounds/      preflight's rounds sent from the Driver: one Ray task on every node with one
                 bounded wait (rounds/cluster.py), for reachability, collectives, storage, shape
    nodeside/    what runs on a node inside a Ray task: the probes and one collective rank
    postflight/  the postflight phase and `make audit`: a finished run judged from its files
    checkpoint/  checkpoint shards: their archives, in parallel, on every node; a resume's snapshot
    resume/      a retry's next attempt, RESUME_FROM, liveness, and a resumed run's postflight
    watch/       the training watchdog and the evidence it gathers from every node

May import: formats/, run/ and other modules of checks/; never argparse (a phase takes a
RunFolder, the Profile and keyword options: cli/ parses the command line); ray only in what talks to the cluster
(tests/py/unit/test_imports.py lists those modules) and torch only in the collective rank.
"""
