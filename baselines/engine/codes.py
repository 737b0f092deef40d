"""The codes of the compiled decision rules: which orderer and which placer the loop plays.

The engine's state keeps two integer slots for them (``pi[ORDERER]``, ``pi[PLACER]`` of
:mod:`cluster_env.core.engine.layout`); the names and the rules behind the codes are the
baselines' (:mod:`baselines.engine._loop` dispatches on them), so they live here, not in the
engine that runs them.
"""
from __future__ import annotations

#: Orderer and placer codes by name (the loop dispatches on the numbers).
ORDERER_CODES = {"fifo": 0, "fifo-strict": 1, "sjf": 2, "las": 3, "tiresias": 4, "2dlas": 4, "random": 5,
                 "oracle": 6, "srpt": 6}
PLACER_CODES = {"first-fit": 0, "consolidate": 1, "best-fit": 1, "spread": 2, "fastest": 3, "random": 4,
                "clairvoyant": 5, "oracle": 5}
O_FIFO, O_STRICT, O_SJF, O_LAS, O_TIRESIAS, O_RANDOM, O_ORACLE = range(7)
#: The priority-mode agent's weighted LAS key (dual_agent.priority): no name in ORDERER_CODES, since
#: it needs weights; baselines.engine.run_weighted_las_episode runs it.
O_WEIGHTED = 7
#: ``las-migrate`` (baselines.migrate): LAS's keys plus the migration rule (its threshold and minimum
#: run reach the loop in a small array, baselines.engine._run_codes).
O_MIGRATE = 8
ORDERER_CODES["las-migrate"] = O_MIGRATE
#: ``gittins`` (baselines.gittins): Tiresias' queues and promotion, the 2D-Gittins index within a queue
#: (its GPU-service table, from the scenario's training split, reaches the loop as an array:
#: baselines.engine._gittins_table).
O_GITTINS = 9
ORDERER_CODES["gittins"] = O_GITTINS
P_FIRST, P_BEST, P_SPREAD, P_FASTEST, P_RANDOM, P_ORACLE = range(6)
