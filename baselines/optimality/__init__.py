"""How good is a schedule: per-window lower bounds and best-known schedules' values.

This package is the one home of the optimality facts of a scenario's windows:

* ``table``: the shipped table per scenario (``tables/<scenario>.json``), read with
  :func:`load_table`, one :class:`WindowReference` per test seed;
* ``bound``: the certified lower bound of a window (:func:`~baselines.optimality.bound.window_lower_bound`);
* ``search``: the hindsight search for a window's best-known schedule;
* ``certificate``: best-known schedules as JSON certificates, replayed on the API and compiled paths;
* ``update``: filling the tables and entering a user's verified better schedule;
* ``cli``: ``cluster-bench verify``, ``best-known`` and ``lower-bound``
  (docs: ``docs/optimality.md``).

A table applies only to records of the scenario's default world (no ``--env`` overrides) whose
window digest matches the one the table recorded: anything else gets no reference, never a wrong one.
"""
from baselines.optimality.table import WindowReference, load_table, reference_for

__all__ = ["WindowReference", "load_table", "reference_for"]
