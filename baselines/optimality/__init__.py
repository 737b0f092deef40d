"""How good is a schedule: per-window lower bounds and best-known schedules' values.

This package is the one home of the optimality facts of a scenario's windows:

* ``table``: the shipped table per scenario (``tables/<scenario>.json``), read with
  :func:`load_table`, one :class:`WindowReference` per test seed;
* the certified lower bound, the hindsight search and the certificates that replay a best-known
  schedule live beside it (their own modules).

A table applies only to records of the scenario's default world (no ``--env`` overrides) whose
window digest matches the one the table recorded: anything else gets no reference, never a wrong one.
"""
from baselines.optimality.table import WindowReference, load_table, reference_for

__all__ = ["WindowReference", "load_table", "reference_for"]
