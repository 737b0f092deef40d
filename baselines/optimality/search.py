"""The hindsight search for a window's best-known schedule.

It sees the realized window (true durations, the world draw: it scores every candidate on the very
episode) and looks for the lowest average JCT:

1. every rule of :data:`RULES` on the window, in the compiled engine: the best of them is where the
   search starts and what it can never be worse than;
2. a per-window (1 + lambda) evolution strategy, in the compiled engine, over the priority index of
   the priority-mode agent (:func:`baselines.engine.run_weighted_las_episode`: LAS's key plus
   ``w . phi`` over :data:`baselines.learned_key.PRIORITY_FEATURES`, a residual placer's weights,
   optionally ``las-migrate``'s migration rule), started from the best rule that index expresses
   (``las+<placer>`` or ``las-migrate+<placer>``: zero weights): antithetic Gaussian steps, the best
   candidate kept when it improves, the step shrunk when none does.

The result is a :class:`SearchResult` whose ``schedule`` is what :mod:`baselines.optimality.certificate`
saves and replays: a named rule, or the index's parameters.

Public names: :data:`RULES`, :class:`SearchResult`, :func:`rule_values`, :func:`search_window`.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np

from baselines.learned_key import PLACER_FEATURES, PRIORITY_FEATURES

#: The rules tried on every window (all compiled): the named baselines and the compositions the
#: room table compares (``random`` is left out: never the best).
RULES = ("fifo", "sjf", "tiresias", "las", "las+fastest", "las-migrate", "las-migrate+consolidate", "gittins",
         "srpt-clairvoyant", "srpt+fastest")
#: Placers the index search may compose with, and the migration threshold of ``las-migrate``.
SEARCH_PLACERS = ("consolidate", "fastest")
#: Largest weight the search proposes (the features are about unit scale).
WEIGHT_LIMIT = 50.0
N_PARAMS = len(PRIORITY_FEATURES) + len(PLACER_FEATURES)


@dataclass
class SearchResult:
    """What the search found on one window."""
    scenario: str
    split: str
    seed: int
    window: str                         # the workload digest
    rules: dict                         # rule name -> average JCT
    best_rule: str
    best_rule_value: float
    value: float                        # the best-known average JCT (<= best_rule_value)
    schedule: dict                      # certificate schedule: {"kind": "rule", ...} or {"kind": "priority", ...}
    episodes: int                       # compiled episodes the search ran (rules included)
    wall_s: float
    trace: list = field(default_factory=list)    # (episodes so far, best value) at each improvement


def _rule_schedule(name: str) -> dict:
    return {"kind": "rule", "policy": name}


def priority_schedule(placer: str, migrate: Optional[float], theta: np.ndarray) -> dict:
    """The certificate schedule of the index with parameters ``theta`` (weights then placer weights)."""
    f = len(PRIORITY_FEATURES)
    return {"kind": "priority", "placer": placer, "migrate": migrate,
            "weights": [float(x) for x in theta[:f]], "placer_weights": [float(x) for x in theta[f:]]}


def _index_start(rule: str) -> Optional[tuple[str, Optional[float]]]:
    """(placer, migrate) of a rule the index expresses with zero weights, else None."""
    from baselines.migrate import DEFAULT_MIGRATE_THRESHOLD
    from baselines.registry import policy_parts

    parts = policy_parts(rule)
    if parts is None or parts[1] not in SEARCH_PLACERS:
        return None
    if parts[0] == "las":
        return parts[1], None
    if parts[0] == "las-migrate":
        return parts[1], DEFAULT_MIGRATE_THRESHOLD
    return None


def rule_values(scenario: str, split: str, seed: int, rules=RULES,
                env_kwargs: Optional[dict] = None) -> tuple[dict, str]:
    """Average JCT of each rule on the window (compiled engine), and the window's digest. A rule
    that refuses the window (``gittins`` on a user's trace, which has no training split of its
    own) is no candidate there and is left out."""
    from baselines.engine import run_compiled_episode
    from baselines.harness.episode import EnvMismatchError

    out, window = {}, ""
    for rule in rules:
        try:
            result = run_compiled_episode(rule, scenario, split, seed, env_kwargs)
        except EnvMismatchError:
            continue
        out[rule] = float(result.record["avg_jct"])
        window = result.record["window"]
    return out, window


def index_value(scenario: str, split: str, seed: int, placer: str, migrate: Optional[float],
                theta: np.ndarray, env_kwargs: Optional[dict] = None) -> float:
    """Average JCT of the priority index with parameters ``theta`` on the window (compiled)."""
    from baselines.engine import run_weighted_las_episode

    f = len(PRIORITY_FEATURES)
    result = run_weighted_las_episode(theta[:f], placer, scenario, split, seed, env_kwargs, placer_weights=theta[f:],
                                      migrate=migrate)
    value = float(result.record["avg_jct"])
    if result.record.get("truncated") or not math.isfinite(value):
        return math.inf
    return value


def search_window(scenario: str, split: str, seed: int, episodes: int = 200, pairs: int = 4,
                  sigma: float = 0.5, rng_seed: int = 0, rules=RULES,
                  env_kwargs: Optional[dict] = None) -> SearchResult:
    """Best-known schedule of one window within ``episodes`` compiled episodes (rules included).

    The strategy: from the best index-expressible rule's parameters (zeros), ``pairs`` antithetic
    Gaussian steps of scale ``sigma`` per round; the best candidate replaces the current point when
    it is lower; otherwise the scale shrinks by 0.7. Deterministic for a given ``rng_seed``.
    ``env_kwargs``: the environment's settings (the shipped tables use none: the scenario's world).
    """
    t0 = time.perf_counter()
    values, window = rule_values(scenario, split, seed, rules, env_kwargs)
    spent = len(values)
    best_rule = min(values, key=values.get)
    best_value, schedule = values[best_rule], _rule_schedule(best_rule)
    trace = [(spent, best_value)]
    starts = [(values[r], r) for r in values if _index_start(r) is not None]
    if starts:
        start_value, start_rule = min(starts)
        placer, migrate = _index_start(start_rule)
        theta, current = np.zeros(N_PARAMS), start_value
        rng = np.random.default_rng([int(rng_seed), int(seed)])
        scale = float(sigma)
        while spent + 2 * pairs <= episodes:
            eps = rng.standard_normal((pairs, N_PARAMS))
            cands = np.clip(np.concatenate([theta + scale * eps, theta - scale * eps]), -WEIGHT_LIMIT, WEIGHT_LIMIT)
            costs = np.array([index_value(scenario, split, seed, placer, migrate, c, env_kwargs) for c in cands])
            spent += len(cands)
            k = int(np.argmin(costs))
            if costs[k] < current:
                theta, current = cands[k], float(costs[k])
                if current < best_value:
                    best_value, schedule = current, priority_schedule(placer, migrate, theta)
                    trace.append((spent, best_value))
            else:
                scale *= 0.7
    return SearchResult(scenario=scenario, split=split, seed=int(seed), window=window, rules=values,
                        best_rule=best_rule, best_rule_value=values[best_rule], value=best_value,
                        schedule=schedule, episodes=spent, wall_s=time.perf_counter() - t0, trace=trace)


__all__ = ["RULES", "SEARCH_PLACERS", "SearchResult", "index_value", "priority_schedule", "rule_values", "search_window"]
