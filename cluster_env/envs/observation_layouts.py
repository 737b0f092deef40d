"""The observation layouts: their names and the names of their columns, in one place.

Every layout appends columns to the default one (:mod:`cluster_env.envs.observation`) and never
reorders them: ``extended`` (:mod:`~cluster_env.envs.observation_ext`), ``extended-v2``
(``extended`` plus :mod:`~cluster_env.envs.observation_place`'s placement columns) and
``objectives-v1`` (:mod:`~cluster_env.envs.observation_obj`). The builders, the policies that read
columns by name and the docs' tables all take the names from here.
"""
from __future__ import annotations

from gymnasium import spaces

from cluster_env.envs.observation import GLOBAL_FEATURES, JOB_FEATURES

#: Values of the environment argument ``observation``.
OBSERVATION_MODES = ("default", "extended", "extended-v2", "objectives-v1")
#: The ``extended`` columns appended to the default ones, in order.
EXTRA_JOB_FEATURES = ("tenant_slot", "tenant_seen_log", "tenant_mean_log", "tenant_recent_log", "attained_all_log")
EXTRA_GLOBAL_FEATURES = ("tick_phase", "finished_mean_log", "finished_recent_log")
#: Tenant slots of ``tenant_slot`` (indices beyond wrap around).
TENANT_SLOTS = 64
#: The placement columns ``extended-v2`` appends to ``extended``'s, in order.
PLACEMENT_JOB_FEATURES = ("machines_used", "slowest_type_speed", "mixed_types", "current_speed",
                          "best_free_speed", "speedup_free", "spread_beyond", "since_start_log")
#: The ``objectives-v1`` columns, in order.
OBJECTIVE_JOB_FEATURES = ("high_priority", "has_deadline", "deadline_left_log", "overdue", "tenant_slot",
                          "tenant_quota", "tenant_used", "tenant_borrow")


def check_observation_mode(value: object) -> str:
    """``value`` if it names an observation layout; a ``ValueError`` naming the argument otherwise."""
    if not isinstance(value, str) or value not in OBSERVATION_MODES:
        raise ValueError(f"observation must be one of {list(OBSERVATION_MODES)}, got {value!r} "
                         f"('extended' adds tenant statistics, attained service and the tick phase; 'extended-v2' adds "
                         f"the running jobs' placement to it; 'objectives-v1' adds job classes, deadlines and tenant quotas to "
                         f"the default layout)")
    return value


def job_features(mode: str) -> tuple[str, ...]:
    """Names of the ``jobs`` columns of an observation layout."""
    mode = check_observation_mode(mode)
    if mode == "default":
        return JOB_FEATURES
    if mode == "extended":
        return JOB_FEATURES + EXTRA_JOB_FEATURES
    if mode == "objectives-v1":
        return JOB_FEATURES + OBJECTIVE_JOB_FEATURES
    return JOB_FEATURES + EXTRA_JOB_FEATURES + PLACEMENT_JOB_FEATURES


def global_features(mode: str) -> tuple[str, ...]:
    """Names of the ``global`` columns of an observation layout (``extended-v2``: ``extended``'s;
    ``objectives-v1``: the default's)."""
    return GLOBAL_FEATURES + (EXTRA_GLOBAL_FEATURES if check_observation_mode(mode) in ("extended", "extended-v2")
                              else ())


def replace_spaces(observation_spaces: dict, **blocks: spaces.Space) -> None:
    """Put ``blocks`` (e.g. ``jobs=Box(...)``) into every agent's Dict space, in place. One object
    per block serves every agent: spaces stay cached (``observation_space(agent)`` returns it)."""
    for agent, whole in observation_spaces.items():
        observation_spaces[agent] = spaces.Dict({**whole.spaces, **blocks})
