"""The orchestration floor: configs into run specs, runs, calibration, shards, plans.

These modules tie the parts below them (tasks, systems, agents, models, metrics, stats)
into the workflow's steps; the command line and the Snakemake rules call them.
Importing the package itself imports nothing.
"""
