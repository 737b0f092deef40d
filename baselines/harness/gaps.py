"""How far from optimal: a policy's gap to the best-known schedule and to the certified lower bound
of each window, where the shipped optimality table has the window (:mod:`baselines.optimality`).

The gap is a paired geometric mean, like every ratio of the harness: over the windows the table
covers, the geometric mean of ``avg_jct(policy) / best_known`` minus 1, with its 95% bootstrap
interval (:func:`baselines.harness.stats.geo_mean_ci`), and the same against the lower bound.
``+0.12`` reads "12% above the best-known schedule"; a negative gap to best-known is a schedule
better than the best known (``cluster-bench verify`` can then record it). The gap to the bound is
never negative where the bound holds. Only records that
:func:`baselines.optimality.reference_for` accepts count (the scenario's default world, a seed the
table lists, the same jobs, not truncated); ``windows`` says how many the figures rest on.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Sequence

from baselines.harness.files import number
from baselines.harness.stats import geo_mean_ci

#: The metric the optimality tables hold.
GAP_METRIC = "avg_jct"


@dataclass(frozen=True)
class OptimalityGap:
    """``policy``'s gaps over the ``windows`` its records share with the shipped table."""

    policy: str
    windows: int                         # the table's entries (test seeds) among the policy's records
    best_known: float = math.nan         # geometric mean of avg_jct / best_known, minus 1
    best_known_lo: float = math.nan      # its 95% bootstrap interval
    best_known_hi: float = math.nan
    lower_bound: float = math.nan        # the same against the certified lower bound
    lower_bound_lo: float = math.nan
    lower_bound_hi: float = math.nan

    def columns(self) -> dict[str, Any]:
        """The summary columns: ``gap_best_known`` (``_lo``, ``_hi``), ``gap_lower_bound`` (``_lo``,
        ``_hi``) and ``optimality_windows``."""
        d = asdict(self)
        out: dict[str, Any] = {}
        for name in ("best_known", "lower_bound"):
            for suffix in ("", "_lo", "_hi"):
                out[f"gap_{name}{suffix}"] = d[name + suffix]
        out["optimality_windows"] = self.windows
        return out


def optimality_gap(records: Sequence[dict[str, Any]], policy: str) -> OptimalityGap:
    """``policy``'s gaps to best-known and to the lower bound over the windows the shipped table
    has (no such window: ``windows`` 0 and NaN gaps)."""
    from baselines.optimality import reference_for

    by_window: dict[tuple[str, int], tuple[float, float]] = {}      # a table entry: (window, seed)
    for r in records:
        if r.get("policy") != policy:
            continue
        ref = reference_for(r)
        value = number(r.get(GAP_METRIC, math.nan))          # null in our JSON files is NaN
        if ref is None or not (value > 0 and math.isfinite(value)) or not (ref.best_known > 0 and ref.lower_bound > 0):
            continue
        by_window[(ref.window, ref.seed)] = (value / ref.best_known, value / ref.lower_bound)
    if not by_window:
        return OptimalityGap(policy, 0)
    to_best = geo_mean_ci([b for b, _ in by_window.values()])
    to_bound = geo_mean_ci([lb for _, lb in by_window.values()])
    return OptimalityGap(policy, len(by_window), *(x - 1.0 for x in to_best), *(x - 1.0 for x in to_bound))


def no_gap_reason(records: Sequence[dict[str, Any]]) -> str:
    """Why no record of ``records`` has a gap to best-known, in a few words: no table ships for the
    scenario, the table holds other windows (split, seeds), or another world (``--env`` overrides:
    the table's values hold for the scenario's default world only)."""
    from baselines.optimality.table import TABLES_DIR, load_table, reference_for

    scenarios = sorted({str(r.get("scenario", "")) for r in records})
    reasons = []
    for scenario in scenarios:
        mine = [r for r in records if str(r.get("scenario", "")) == scenario]
        split = str(mine[0].get("split", "")) if mine else ""
        if not (TABLES_DIR / f"{scenario}.json").is_file():
            shipped = ", ".join(sorted(p.stem for p in TABLES_DIR.glob("*.json"))) or "none"
            reasons.append(f"no optimality table ships for {scenario} (tables: {shipped})")
            continue
        table = load_table(scenario, split)
        if table is None:
            reasons.append(f"{scenario}'s optimality table holds test windows, this run plays the {split} split")
            continue
        changed = sorted({str(r.get("env")) for r in mine if r.get("env")})
        if changed and all(r.get("env") for r in mine):
            reasons.append(f"{scenario}'s optimality table holds its default world, this run changes it "
                           f"({'; '.join(changed)})")
            continue
        seeds = sorted(table)
        if not any(int(r.get("seed", -1)) in table for r in mine):
            have = f"{seeds[0]}-{seeds[-1]}" if seeds == list(range(seeds[0], seeds[-1] + 1)) else \
                ",".join(map(str, seeds))
            reasons.append(f"{scenario}'s optimality table has test seeds {have}, none of this run's")
            continue
        if all(r.get("truncated") for r in mine if int(r.get("seed", -1)) in table):
            reasons.append("every episode on the table's windows was truncated")
            continue
        if not any(reference_for(r) for r in mine):
            reasons.append(f"this run's windows of {scenario} are not the ones its optimality table recorded")
    return "; ".join(reasons) or "no window of the shipped optimality tables"


def fmt_gap(gap: float, lo: float, hi: float) -> str:
    """``+12.3% [+10.1%, +14.5%]`` (``-`` for none; one window: no interval)."""
    if math.isnan(gap):
        return "-"
    text = f"{gap:+.1%}"
    return text if math.isnan(lo) else f"{text} [{lo:+.1%}, {hi:+.1%}]"


__all__ = ["GAP_METRIC", "OptimalityGap", "fmt_gap", "no_gap_reason", "optimality_gap"]
