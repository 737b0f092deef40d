"""Load sweeps: metrics against offered load, one curve per policy (the field's canonical figure,
like the JCT-against-input-rate figures of the Gavel and Tiresias papers).

Every point runs every policy on the same windows with the environment's ``load=`` argument set to
the target (each window's arrival times are rescaled so that its offered load equals it); a point
reports, per policy, the mean over windows of each metric with a 95% bootstrap interval, the
offered load the episodes measured, and the paired ratio to a reference policy.
"""
from __future__ import annotations

import csv
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Sequence

import numpy as np

from baselines.harness.files import number
from baselines.harness.gaps import optimality_gap
from baselines.harness.report import fallback_summary, verdict_notes
from baselines.harness.stats import (DEFAULT_REFERENCE, UNIT_WORLD_DRAW, PairingError, claim_note, mean_ci,
                                     paired_summary, window_values)
from baselines.harness.labels import policy_labels
from baselines.harness.sweep import (PolicySpec, ResolvedPolicy, RunInterrupted, make_tasks, resolve_once, run_tasks,
                                    stopped_results)

#: Metrics a sweep summarises (each gets ``_lo``/``_hi`` interval columns).
SWEEP_METRICS = ("avg_jct", "p95_jct", "avg_queue_delay", "gpu_utilization")


@dataclass
class LoadSweep:
    """A finished sweep: its settings, one record per episode, and one row per (policy, load)."""

    scenario: str
    split: str
    loads: list[float]
    policies: list[str]
    seeds: list[int]
    env_kwargs: dict
    reference: Optional[str]
    records: list[dict[str, Any]] = field(default_factory=list)
    rows: list[dict[str, Any]] = field(default_factory=list)


def run_load_sweep(scenario: str, loads: Sequence[float], policies: Sequence[PolicySpec], seeds: Sequence[int],
                   split: str = "test", env_kwargs: Optional[dict] = None, reference: Optional[str] = DEFAULT_REFERENCE,
                   backend: str = "auto", workers: Optional[int] = None, progress: bool = False,
                   ray_address: Optional[str] = None, resolved: Optional[Sequence[ResolvedPolicy]] = None) -> LoadSweep:
    """Run every policy on every seed at every target load (in one batch of tasks on ``backend``).

    Args:
        scenario, split, seeds: the windows (the same at every load, rescaled).
        loads: target offered loads (positive), passed to the environment as ``load=``.
        policies: names or policy objects (see :func:`baselines.harness.sweep.run_tasks`).
        env_kwargs: other environment settings; ``load`` is the sweep's and may not be among them.
        reference: the policy the paired ratios are taken against (default: the scenario's
            yardstick, :mod:`baselines.yardstick`; None: no ratios; it must be among ``policies``
            otherwise).
        resolved: ``policies`` already resolved for ``scenario`` (else resolved here, once each
            for every load).
    """
    env_kwargs = dict(env_kwargs or {})
    if "load" in env_kwargs:
        raise ValueError("env_kwargs sets 'load', but a load sweep sets it at each point; use loads=")
    loads = [float(x) for x in loads]
    if not loads or any(not (x > 0 and math.isfinite(x)) for x in loads):
        raise ValueError(f"loads must be positive numbers, got {loads}")
    if len(set(loads)) != len(loads):
        raise ValueError(f"loads must be distinct, got {loads}")
    if resolved is None:
        resolved = [resolve_once(p, scenario) for p in policies]
    # The records' labels; one policy twice is an error.
    names = policy_labels(list(policies), scenario, [r.name for r in resolved], [r.baseline for r in resolved])
    if reference == DEFAULT_REFERENCE:
        from baselines.yardstick import yardstick

        reference = yardstick(scenario)
    if reference is not None and reference not in names:
        raise ValueError(f"the reference policy {reference!r} is not among the policies {names}")
    tasks, task_load = [], []
    for load in loads:
        batch = make_tasks(list(policies), [scenario], split, list(seeds), {**env_kwargs, "load": load}, labels=names,
                           resolved=resolved)
        tasks += batch
        task_load += [load] * len(batch)

    def sweep_of(results: Sequence) -> LoadSweep:
        records = [{**result.record, "load": load} for load, result in zip(task_load, results) if result is not None]
        return LoadSweep(scenario, split, loads, names, [int(s) for s in seeds], env_kwargs, reference, records)

    try:
        results = run_tasks(tasks, backend=backend, workers=workers, progress=progress, ray_address=ray_address)
    except BaseException as stop:
        done = stopped_results(stop)
        if done is not None:        # Ctrl-C, lost workers, a failed episode: the episodes that finished
            stop.partial_sweep = partial = sweep_of(done)     # type: ignore[attr-defined]
            try:
                partial.rows = sweep_rows(partial.records, reference)
            except PairingError:    # a policy's partner episode did not finish: no ratios
                partial.rows = sweep_rows(partial.records, None)
        raise
    sweep = sweep_of(results)
    try:
        sweep.rows = sweep_rows(sweep.records, reference)
    except KeyboardInterrupt:           # every episode finished; their rows (intervals) were being computed
        stop = RunInterrupted(list(results))
        stop.partial_sweep = sweep      # type: ignore[attr-defined]  (its episodes, without rows)
        raise stop from None
    return sweep


def partial_sweep(stop: BaseException) -> Optional[LoadSweep]:
    """The episodes that finished before :func:`run_load_sweep` stopped with ``stop`` (Ctrl-C,
    lost workers, an episode's own error), as a sweep of what finished; None for other errors."""
    return getattr(stop, "partial_sweep", None)


def sweep_rows(records: Sequence[dict[str, Any]], reference: Optional[str] = DEFAULT_REFERENCE,
               metrics: Sequence[str] = SWEEP_METRICS) -> list[dict[str, Any]]:
    """One row per (policy, load) of records that carry ``load``: ``n``, ``truncated``, the mean
    and 95% bootstrap interval of each metric (over distinct windows: seeds that play one window
    count once, :func:`~baselines.harness.stats.window_values`; ``windows`` and ``unit`` say what
    they rest on) and of the measured ``offered_load``, ``fallback_share`` (of the decisions), the
    gaps to the optimality table (:mod:`baselines.harness.gaps`: none where the load changes the
    scenario's default world), and (with a reference) ``ratio_avg_jct`` with ``_lo``/``_hi`` and
    ``win_rate_avg_jct`` against it."""
    groups: dict[tuple[str, float], list[dict]] = {}
    for r in records:
        groups.setdefault((r["policy"], float(r["load"])), []).append(r)
    rows = []
    for (policy, load), rs in groups.items():
        row: dict[str, Any] = {"policy": policy, "load": load, "n": len(rs),
                               "truncated": sum(bool(r.get("truncated")) for r in rs)}
        row["offered_load"] = float(np.nanmean([float(r.get("offered_load", math.nan)) for r in rs])) \
            if any(math.isfinite(float(r.get("offered_load", math.nan))) for r in rs) else math.nan
        for metric in metrics:
            values, unit = window_values(rs, metric)
            row[metric], row[metric + "_lo"], row[metric + "_hi"] = mean_ci(values)
            row["windows"], row["unit"] = len(values) if unit != UNIT_WORLD_DRAW else 1, unit
        row["fallback_share"] = fallback_summary(rs)["fallback_share"]
        row.update(optimality_gap(rs, policy).columns())
        if reference is not None:
            at_load = [r for r in records if float(r["load"]) == load]
            try:
                s = paired_summary(at_load, policy, reference, "avg_jct")
                row.update({"ratio_avg_jct": s.geo_mean, "ratio_avg_jct_lo": s.ci_low, "ratio_avg_jct_hi": s.ci_high,
                            "win_rate_avg_jct": s.win_rate, "ratio_avg_jct_windows": s.distinct,
                            "ratio_avg_jct_units": s.units, "ratio_avg_jct_unit": s.unit})
            except PairingError as exc:
                raise PairingError(f"load {load}: {exc}") from None
        rows.append(row)
    return rows


def write_sweep(sweep: LoadSweep, out: "str | Path", plot: bool = True, stem: str = "load_sweep",
                complete: bool = True) -> list[Path]:
    """``load_sweep.csv`` (one row per policy and load), ``load_sweep.json`` (settings, rows and
    every episode; standard JSON, NaN as null) and ``load_sweep.png`` in ``out``, named ``stem``
    (``complete=False`` for the episodes of a stopped sweep: ``meta.complete``); returns the paths."""
    from baselines.harness.files import atomic_write, json_text

    out = Path(out)
    fields = list(dict.fromkeys(k for r in sweep.rows for k in r))

    def write_rows(f) -> None:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        writer.writerows(sweep.rows)

    csv_path = atomic_write(out / f"{stem}.csv", write_rows, newline="")
    meta = {"scenario": sweep.scenario, "split": sweep.split, "loads": sweep.loads, "policies": sweep.policies,
            "seeds": sweep.seeds, "env_kwargs": sweep.env_kwargs, "reference": sweep.reference, "complete": complete}
    text = json_text({"meta": meta, "rows": sweep.rows, "episodes": sweep.records}, default=str)
    json_path = atomic_write(out / f"{stem}.json", lambda f: f.write(text))
    return [csv_path, json_path] + (write_sweep_plot(sweep, out, stem) if plot else [])


def write_sweep_plot(sweep: LoadSweep, out: "str | Path", stem: str = "load_sweep") -> list[Path]:
    """``load_sweep.png`` (named ``stem``) in ``out``; returns its path in a list."""
    from baselines.harness.paired_plots import plot_load_sweep

    return [plot_load_sweep(sweep.rows, Path(out) / f"{stem}.png",
                            title=f"{sweep.scenario}/{sweep.split}: {len(sweep.seeds)} windows per point, "
                                  "mean and 95% CI", reference=sweep.reference)]


def format_sweep(sweep: LoadSweep, metric: str = "avg_jct") -> str:
    """A compact text table: one line per policy, ``mean [lo, hi]`` of ``metric`` per load."""
    loads = sweep.loads
    by = {(r["policy"], r["load"]): r for r in sweep.rows}
    head = [f"{metric} (mean [95% CI] over distinct windows) against target load; {len(sweep.seeds)} seeds per point"
            + (f"; ratio to {sweep.reference} in ()" if sweep.reference else "")]
    width = max(len(p) for p in sweep.policies)
    head.append(" " * width + "  " + "  ".join(f"{'load ' + format(x, 'g'):>34}" for x in loads))
    for policy in sweep.policies:
        cells = []
        for x in loads:
            r = by[(policy, x)]
            cell = f"{r[metric]:,.0f} [{r[metric + '_lo']:,.0f}, {r[metric + '_hi']:,.0f}]"
            if "ratio_avg_jct" in r and metric == "avg_jct":
                cell += f" ({r['ratio_avg_jct']:.2f})"
            if r["truncated"]:
                cell += " TRUNCATED"
            cells.append(f"{cell:>34}")
        head.append(f"{policy:<{width}}  " + "  ".join(cells))
    measured = [by[(sweep.policies[0], x)]["offered_load"] for x in loads]
    head.append("measured offered load: " + ", ".join("nan" if math.isnan(m) else f"{m:.3f}" for m in measured))
    windows: dict[float, set] = {}
    for r in sweep.records:                 # seeds that play the same jobs are one window
        windows.setdefault(float(r["load"]), set()).add(str(r.get("window", r["seed"])))
    repeated = {x: len(windows.get(float(x), ())) for x in loads if len(windows.get(float(x), ())) < len(sweep.seeds)}
    if repeated:
        one = any(d == 1 for d in repeated.values())
        head.append(f"REPEATED WINDOWS: the {len(sweep.seeds)} seeds play only "
                    + ", ".join(f"{d} distinct window{'s' * (d != 1)} at load {x:g}" for x, d in repeated.items())
                    + "; the means, ratios and intervals count each distinct window once"
                    + (" (where all seeds play one window, they rest on its world draws, per (window, seed))"
                       if one else ""))
    shares = {p: max(by[(p, x)].get("fallback_share", math.nan) for x in loads) for p in sweep.policies}
    head.append("fallback (largest share of decisions the fallback rule replaced, over the loads): "
                + ", ".join(f"{p} {'-' if math.isnan(v) else format(v, '.1%')}" for p, v in shares.items()))
    if not any(r.get("optimality_windows", 0) for r in sweep.rows):
        head.append("gap to best-known: none (the optimality tables hold the scenario's default world; a load sweep "
                    "rescales its arrivals)")
    distinct = min(windows.values(), key=len) if windows else set()
    if sweep.reference:
        head += verdict_notes(len(distinct))
    elif claim_note(len(distinct)):
        head.append(claim_note(len(distinct)))
    return "\n".join(head)
