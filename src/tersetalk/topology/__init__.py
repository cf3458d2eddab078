"""The topology study: star or chain per example, chosen by a router from the Manager's brief.

- :mod:`~tersetalk.topology.rule`: the decision rule as data (signals, weights, θ), what
  the runs record and the analysis replays;
- :mod:`~tersetalk.topology.signals`: what a brief asks for, read from its content
  whichever protocol carried it (the router's six signals);
- :mod:`~tersetalk.topology.router`: the router's policies, settings and fitted-router
  files (the engine's routed topology, :class:`tersetalk.agents.topology.Routed`, runs
  what it decides);
- :mod:`~tersetalk.topology.metrics`, :mod:`~tersetalk.topology.fit`,
  :mod:`~tersetalk.topology.heldout`, :mod:`~tersetalk.topology.plots`: the study's
  analysis, from what the runs and the signals files recorded;
- :mod:`~tersetalk.topology.cli` (``tersetalk topology``) and
  :mod:`~tersetalk.topology.fit_cli` (``topology-fit``, ``topology-selection``,
  ``topology-heldout``): its commands.

The package stands below the engine, which imports the router: nothing here imports
:mod:`tersetalk.agents`, :mod:`tersetalk.systems` or :mod:`tersetalk.pipeline`. What
writes briefs through a routed system stands above them
(:mod:`tersetalk.pipeline.topology_signals`, ``topology-signals`` and ``route``), and so
do the routed systems (:mod:`tersetalk.systems.topology`) and the study's targets
(:mod:`tersetalk.stats.targets.topology`). Importing the package itself imports nothing.
"""
