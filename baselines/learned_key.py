"""The learned priority key's layout, shared by the compiled engine (:mod:`baselines.engine`) and
the priority-mode agent (:mod:`dual_agent.priority`), so that both read one definition.

The agent's key is ``log1p(attained) + w . phi`` over :data:`PRIORITY_FEATURES` (computed from the
extended observation), and its residual placer adds :data:`PLACER_BONUS` to the heuristic's pick
on top of ``v . psi`` over :data:`PLACER_FEATURES`. The compiled engine computes the same features
in the same order, so a change here changes both (and the engine's cached machine code is pruned
when this file changes). ``baselines`` never imports ``dual_agent``: this module is the lower
layer's, and ``dual_agent.priority`` imports it.

Public names: :data:`PRIORITY_FEATURES`, :data:`TENANT_FEATURES`, :data:`PLACER_FEATURES`,
:data:`PLACER_BONUS`.
"""
from __future__ import annotations

#: Per-row inputs of the score, each about unit scale (names are the model's contract; a saved
#: agent stores them and a loader refuses another list).
PRIORITY_FEATURES = (
    "gpus_log2",          # log2(GPUs requested)
    "tenant_dev",         # tenant's mean log1p(run time) of finished jobs minus everyone's; 0 unknown
    "tenant_recent_dev",  # the same with the moving averages (recent finishes)
    "tenant_known",       # 1 once one of the tenant's jobs finished in the episode
    "comm_intensity",     # how communication-heavy the job type is (Gavel), in [0, 1]
    "best_speed",         # nominal speed on the fastest GPU type it may use
    "restarts",           # log1p(times preempted) / 3
    "wait",               # log1p(seconds since submission) / 10
    "running",            # 1 for a running candidate (a bias against preempting it)
)
#: Indices of :data:`PRIORITY_FEATURES` read from the tenants' running statistics of finished
#: durations (the engine keeps those statistics only when one of these weights is not zero).
TENANT_FEATURES = tuple(i for i, name in enumerate(PRIORITY_FEATURES) if name.startswith("tenant_"))
#: Per-machine inputs of the residual placer's score, for the job being placed (float32 features of
#: the observation, as the heuristic placers read them).
PLACER_FEATURES = (
    "whole",        # 1 if the machine's free GPUs hold the job's whole remaining need
    "rel_speed",    # the job's speed there (nominal x measured) over the best allowed machine's
    "free_frac",    # free GPUs / GPUs on the machine
    "free_gpus",    # free GPUs / 8
    "jobs",         # running jobs on the machine / 4 (contention)
)
#: Score added to the heuristic placer's own pick (learned placer weights must outweigh it).
PLACER_BONUS = 0.1

__all__ = ["PLACER_BONUS", "PLACER_FEATURES", "PRIORITY_FEATURES", "TENANT_FEATURES"]
