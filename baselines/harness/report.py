"""Result tables and files: per policy the mean of each metric and its paired ratio to a reference.

Every policy runs on the same windows (scenario, split, seed, environment settings), so the table
shows, next to each policy's mean, the geometric mean over windows of ``policy / reference`` with
its 95% bootstrap interval and the win rate (:mod:`baselines.harness.stats`). The reference is the
scenario's yardstick unless one is named (:mod:`baselines.yardstick`). Where the shipped
optimality table has the windows, each policy's gap to the best-known schedule and to the lower
bound (:mod:`baselines.harness.gaps`); and the share of its decisions that the fallback rule
replaced (``invalid_action="fallback"``). Truncated episodes are marked ``TRUNCATED`` and left out
of the ratios. Below :data:`~baselines.harness.stats.MIN_VERDICT_WINDOWS` distinct windows the
table says that its intervals carry no verdict, below 100 that claims rest on 100.
"""
from __future__ import annotations

import csv
import math
from pathlib import Path
from typing import Any, Iterable, Optional, Sequence

import numpy as np

from cluster_env.core.metrics import METRIC_KEYS

from baselines.harness.files import json_text, number
from baselines.harness.gaps import GAP_METRIC, fmt_gap, no_gap_reason, optimality_gap
from baselines.harness.metric_labels import table_header
from cluster_env.core.objectives import OBJECTIVE_KEYS
from baselines.harness.stats import (DEFAULT_METRIC, DEFAULT_REFERENCE, MIN_VERDICT_WINDOWS, UNIT_WORLD_DRAW,
                                     PairingError, claim_note, direction_note, fmt_interval, fmt_ratio,
                                     lower_is_better, paired_summary, resolve_reference, truncation)

RECORD_KEYS = ("policy", "scenario", "split", "seed", *METRIC_KEYS, "return", "steps", "wall_s",
               "env", "window", "truncated", "jobs_unfinished", "offered_load", "pending_window",
               "fallbacks", "fallback_share")
#: Columns the summaries derive per episode from two metrics (not metrics of the environment, so
#: records and score files keep their keys): name -> (numerator, denominator); NaN when the
#: denominator is 0. ``preemptions_per_job``: preemptions (of every job, finished or not) per
#: finished job.
DERIVED_METRICS = {"preemptions_per_job": ("preemptions", "jobs_finished")}
#: What :func:`summarize` averages by default: every metric, then the derived columns.
SUMMARY_METRICS = (*METRIC_KEYS, *DERIVED_METRICS)
#: Metrics shown in the printed table (the files have all of them, the preemption count too).
TABLE_METRICS = ("avg_jct", "p95_jct", "avg_queue_delay", "avg_slowdown", "gpu_utilization", "total_fee",
                 "preemptions_per_job")
def has_values(records: Sequence[dict[str, Any]], key: str) -> bool:
    """Whether some of ``records`` has a value of ``key`` that is not NaN: a metric their scenario
    measures (``philly-tenants-v1`` has no deadline, so its ``deadline_attainment`` is NaN in
    every episode; one NaN episode among others is a value of its own and keeps the column). A
    :data:`DERIVED_METRICS` column has values where its two metrics give one."""
    for r in records:
        try:
            if not math.isnan(metric_value(r, key)):
                return True
        except KeyError:             # a record without the metric (or the metrics it derives from)
            continue
    return False


def table_metrics(records: Sequence[dict[str, Any]], metric: Optional[str] = None) -> tuple[str, ...]:
    """:data:`TABLE_METRICS`, then the service-objective metrics the records measure (a scenario
    with classes, deadlines or quotas: :data:`cluster_env.core.objectives.OBJECTIVE_KEYS`; not
    those NaN in every record, :func:`has_values`); ``metric`` (a table paired on it) first."""
    extra = tuple(k for k in OBJECTIVE_KEYS if k != "deadline_jobs" and has_values(records, k))
    metrics = TABLE_METRICS + extra
    if metric is None:
        return metrics
    return (metric, *(m for m in metrics if m != metric))


#: Metrics whose paired ratio to the reference the summaries carry (the table shows the first).
PAIRED_METRICS = ("avg_jct", "p95_jct", "avg_slowdown")


def metric_value(record: dict[str, Any], key: str) -> float:
    """An episode's value of a metric or of a :data:`DERIVED_METRICS` column."""
    if key in DERIVED_METRICS:
        numerator, denominator = DERIVED_METRICS[key]
        d = number(record[denominator])
        return number(record[numerator]) / d if d else math.nan
    return number(record[key])          # null in our JSON files is NaN


def summarize(records: Sequence[dict[str, Any]], metrics: Iterable[str] = SUMMARY_METRICS,
              reference: Optional[str] = DEFAULT_REFERENCE,
              paired_metrics: Sequence[str] = PAIRED_METRICS) -> list[dict[str, Any]]:
    """One row per (scenario, policy): mean and sample standard deviation of each metric (and
    derived column, :data:`DERIVED_METRICS`) over seeds, truncation counts, and for each of ``paired_metrics`` the paired ratio to ``reference``
    (``ratio_M``, ``ratio_M_lo``, ``ratio_M_hi``, ``win_rate_M``, ``ratio_M_n`` paired episodes,
    ``ratio_M_windows`` distinct windows among them, ``ratio_M_units`` the values the interval
    rests on and ``ratio_M_unit`` what one is (a window, or one window's world draw); NaN when the
    reference did not run on the scenario; ``pairing_error`` says why when windows do not pair).
    ``reference`` :data:`~baselines.harness.stats.DEFAULT_REFERENCE` is each scenario's yardstick
    on the first of ``paired_metrics`` (:func:`baselines.yardstick.yardstick`).
    Each row also has ``fallbacks`` and ``fallback_share`` (of all its episodes' decisions, NaN for
    records without the count) and the gaps of :func:`baselines.harness.gaps.optimality_gap`
    (``gap_best_known``, ``gap_lower_bound`` with ``_lo``/``_hi``, ``optimality_windows``)."""
    groups: dict[tuple[str, str], list[dict]] = {}
    for r in records:
        groups.setdefault((r["scenario"], r["policy"]), []).append(r)
    rows = []
    references: dict[str, Optional[str]] = {}
    metrics = tuple(metrics)
    for (scenario, policy), rs in groups.items():
        bad, total, unfinished = truncation(rs, policy)
        row: dict[str, Any] = {"scenario": scenario, "policy": policy, "seeds": len(rs),
                               "truncated": bad, "jobs_unfinished": unfinished}
        # The service-objective metrics of a scenario that has them (cluster_env.core.objectives).
        extra = [k for k in OBJECTIVE_KEYS if k not in metrics and all(k in r for r in rs)]
        for key in (*metrics, *extra):
            values = np.array([metric_value(r, key) for r in rs], dtype=np.float64)
            row[key] = float(values.mean())
            row[key + "_std"] = float(values.std(ddof=1)) if len(values) > 1 else 0.0
        row.update(fallback_summary(rs))
        scenario_records = [r for r in records if r["scenario"] == scenario]
        if scenario not in references:
            references[scenario] = resolve_reference(scenario_records, reference,
                                                     paired_metrics[0] if paired_metrics else DEFAULT_METRIC)
        ref = references[scenario]
        has_reference = ref is not None and any(r["policy"] == ref for r in scenario_records)
        row["reference"] = ref if has_reference else None
        for metric in paired_metrics:
            if not all(metric in r for r in rs):
                continue                      # records from elsewhere may lack a metric
            row.update(_paired_columns(scenario_records, policy, ref if has_reference else None, metric, row))
        if all(GAP_METRIC in r for r in rs):
            row.update(optimality_gap(rs, policy).columns())
        rows.append(row)
    return rows


def fallback_summary(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """``fallbacks`` (total over ``records``, one policy's) and ``fallback_share``: the share of
    their decisions (steps) that the fallback rule played instead of a forbidden action (NaN when
    no record counts them, e.g. records of older files)."""
    counted = [r for r in records if "fallbacks" in r]
    if not counted:
        return {"fallbacks": math.nan, "fallback_share": math.nan}
    fallbacks = sum(int(r["fallbacks"]) for r in counted)
    steps = sum(int(r.get("steps", 0)) for r in counted)
    return {"fallbacks": fallbacks, "fallback_share": fallbacks / steps if steps else 0.0}


def _paired_columns(records: Sequence[dict], policy: str, reference: Optional[str], metric: str,
                    row: dict) -> dict[str, Any]:
    nan = math.nan
    cols = {f"ratio_{metric}": nan, f"ratio_{metric}_lo": nan, f"ratio_{metric}_hi": nan,
            f"win_rate_{metric}": nan, f"ratio_{metric}_n": 0, f"ratio_{metric}_windows": 0,
            f"ratio_{metric}_units": 0, f"ratio_{metric}_unit": ""}
    if reference is None:
        return cols
    try:
        s = paired_summary(records, policy, reference, metric)
    except PairingError as exc:
        row["pairing_error"] = str(exc)
        return cols
    cols.update({f"ratio_{metric}": s.geo_mean, f"ratio_{metric}_lo": s.ci_low, f"ratio_{metric}_hi": s.ci_high,
                 f"win_rate_{metric}": s.win_rate, f"ratio_{metric}_n": s.n, f"ratio_{metric}_windows": s.distinct,
                 f"ratio_{metric}_units": s.units, f"ratio_{metric}_unit": s.unit})
    return cols


def format_value(value: float) -> str:
    """A metric value for a table: thousands separators above 1,000, three decimals below 10."""
    if math.isnan(value):
        return "nan"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.3f}"


def _pending_windows(records: Sequence[dict[str, Any]]) -> str:
    ks = sorted({int(r["pending_window"]) for r in records if int(r.get("pending_window", -1)) >= 0})
    return "/".join(map(str, ks)) if ks else "?"


def table_caption(records: Sequence[dict[str, Any]], reference: Optional[str] = DEFAULT_REFERENCE,
                  metric: str = DEFAULT_METRIC) -> str:
    """The lines above a table: pending window, reference, what a ratio, a win, a gap and the
    fallback share mean."""
    better = "lower" if lower_is_better(metric) else "higher"
    named = resolve_reference(records, reference, metric)
    present = named is not None and any(r["policy"] == named for r in records)
    lines = [f"pending window K={_pending_windows(records)} (jobs a policy sees, oldest first); "
             "means over seeds ± sample std"]
    from baselines.yardstick import yardstick_of_records, yardstick_words

    scenario = min((str(r.get("scenario", "")) for r in records), default="")
    role = yardstick_words(scenario, metric, owner="the scenario's")
    what = f"{named}, {role}" if named is not None and named == yardstick_of_records(records, metric) else named
    if present:
        lines.append(f"vs {what}: geometric mean over windows of {metric}(policy)/{metric}({named}) "
                     f"[95% bootstrap CI]; wins: windows where the policy's {metric} is {better}")
    elif reference == DEFAULT_REFERENCE and named is None:
        lines.append("no ratios: these scenarios have different yardsticks; name the reference")
    else:
        yard = f" ({role})" if what != named else ""
        lines.append(f"no ratios: the reference policy {named!r}{yard} is not among the policies")
    lines.append("fallback: share of the policy's decisions that the fallback rule played instead of a forbidden "
                 "action (invalid_action='fallback': FIFO's / first-fit's choice)")
    return "\n".join(lines)


def _gap_caption(rows: Sequence[dict[str, Any]]) -> Optional[str]:
    """The line that says what the gap columns rest on, or None when no row has a gap."""
    counts = sorted({int(r.get("optimality_windows", 0)) for r in rows} - {0})
    if not counts:
        return None
    n = f"{counts[0]}" if len(counts) == 1 else f"{counts[0]}-{counts[-1]}"
    return (f"gap to best-known / to bound: geometric mean over the {n} window(s) the shipped optimality table "
            f"has of {GAP_METRIC}(policy)/best-known (/lower bound) - 1 [95% bootstrap CI] "
            "(baselines/optimality/tables; the scenario's default world only)")


#: Column names of :func:`format_table` (and ``cluster-bench run --columns``) besides metric names:
#: ``ratio`` is the paired ratio to the reference, ``gap`` the gap to best-known, ``gap_bound`` the
#: gap to the lower bound, ``fallback`` the share of decisions the fallback rule replaced.
TABLE_COLUMNS = ("scenario", "seeds", "ratio", "wins", "gap", "gap_bound", "fallback")
#: The width in characters that ``cluster-bench run``'s default table fits (a terminal's); the
#: columns left out are in summary.csv and results.json.
TABLE_WIDTH = 120
#: The order in which a table fitted to a width keeps its columns (after ``policy`` and the flags):
#: the first metric, the paired ratio and wins, the gap, the scenario's service objectives, then the rest.
_FIT_ORDER = ("ratio", "wins", "gap", "fallback", "seeds", "p95_jct", "avg_slowdown", "gpu_utilization",
              "avg_queue_delay", "gap_bound", "total_fee", "preemptions_per_job")


def table_column_names(records: Sequence[dict[str, Any]] = ()) -> list[str]:
    """Every name ``columns`` may hold: :data:`TABLE_COLUMNS` and the metrics (with the service
    objectives of ``records``' scenario, or all of them when no records are given)."""
    objectives = [k for k in OBJECTIVE_KEYS if not records or any(k in r for r in records)]
    return [*TABLE_COLUMNS, *SUMMARY_METRICS, *objectives]


def _wrap(text: str, width: Optional[int]) -> str:
    """Each line of ``text`` wrapped to ``width`` characters (None: as it is)."""
    if width is None:
        return text
    import textwrap

    return "\n".join(textwrap.fill(line, width, subsequent_indent="  ", break_on_hyphens=False) or line
                     for line in text.split("\n"))


def format_table(records: Sequence[dict[str, Any]], metrics: Sequence[str] = TABLE_METRICS,
                 markdown: bool = False, reference: Optional[str] = DEFAULT_REFERENCE,
                 paired_metric: str = DEFAULT_METRIC, columns: Optional[Sequence[str]] = None,
                 width: Optional[int] = None, left_out_hint: str = "the summary files have every column") -> str:
    """A table with one line per scenario and policy: ``mean ± std`` per metric (each head names
    its unit, :func:`baselines.harness.metric_labels.table_header`), and for
    ``paired_metric`` the paired ratio to ``reference`` with its interval and the win rate, under
    a caption naming the pending window and the reference. Rows with truncated episodes are
    flagged ``TRUNCATED k/n`` (those windows are left out of the ratios).

    Which columns: every one (``metrics``, ratio, wins, gaps, fallback) by default; ``columns``
    names them (:func:`table_column_names`; ``policy``, the flags and, with several scenarios, the
    scenario always come); ``width`` keeps the most telling columns that fit that many characters,
    names the others in a line (with ``left_out_hint``), and wraps the caption and notes to it. Where no row has a gap to
    best-known, a line says why."""
    first = metrics[0] if metrics else paired_metric
    names = table_column_names(records)
    unknown = [c for c in columns or () if c not in names and c != "policy"]
    if unknown:
        raise ValueError(f"unknown table column(s) {', '.join(map(repr, unknown))}; columns: {', '.join(names)}")
    asked = [c for c in columns or () if c != "policy"]
    wanted = list(dict.fromkeys([*metrics, *(c for c in asked if c not in TABLE_COLUMNS)]))
    measured = [m for m in wanted if m in SUMMARY_METRICS or (records and all(m in r for r in records))]
    rows = summarize(records, measured, reference, paired_metrics=(paired_metric,))
    named = resolve_reference(records, reference, paired_metric)
    # A metric a scenario does not measure (NaN in every one of its records) shows "-" in its rows.
    absent = {(scenario, m) for scenario in {r["scenario"] for r in rows} for m in wanted
              if not has_values([x for x in records if x["scenario"] == scenario], m)}
    means = {(r["scenario"], r["policy"]): r.get(paired_metric, math.nan) for r in rows}
    opposite: list[str] = []
    ratio_head = f"{paired_metric} vs {named if named is not None else 'yardstick'}"
    gaps = any(int(r.get("optimality_windows", 0)) for r in rows)
    counts = {int(r.get("optimality_windows", 0)) for r in rows}
    heads = {"scenario": "scenario", "policy": "policy", "seeds": "seeds", "ratio": ratio_head, "wins": "wins",
             "gap": "gap to best-known", "gap_bound": "gap to bound", "fallback": "fallback", "flags": "flags",
             **{m: table_header(m) for m in wanted}}
    table_rows: list[dict[str, str]] = []
    notes = []
    repeats: list[str] = []
    draws: list[str] = []
    distinct: list[int] = []
    for r in rows:
        n = r.get(f"ratio_{paired_metric}_n", 0)
        if r["reference"] is None or n == 0:
            ratio, wins = "-", "-"
        else:
            ratio = f"{fmt_ratio(r[f'ratio_{paired_metric}'])} {fmt_interval(r[f'ratio_{paired_metric}_lo'], r[f'ratio_{paired_metric}_hi'])}"
            d, u = r[f"ratio_{paired_metric}_windows"], r[f"ratio_{paired_metric}_units"]
            wins = f"{round(r[f'win_rate_{paired_metric}'] * u)}/{u}"
            distinct.append(d)
            if direction_note(means[r["scenario"], r["policy"]], means.get((r["scenario"], r["reference"]), math.nan),
                              r[f"ratio_{paired_metric}"]):
                opposite.append(f"{r['scenario']}/{r['policy']}" if len({x["scenario"] for x in rows}) > 1
                                else r["policy"])
            if r[f"ratio_{paired_metric}_unit"] == UNIT_WORLD_DRAW:
                draws.append(f"{r['scenario']}/{r['policy']}: {u} world draws of 1 window")
            elif d < n:
                repeats.append(f"{r['scenario']}/{r['policy']}: {n} episodes on {d} distinct window{'s' * (d != 1)}")
        k = int(r.get("optimality_windows", 0))
        suffix = f" ({k})" if len(counts) > 1 and k else ""
        share = r.get("fallback_share", math.nan)
        flags = []
        if r["truncated"]:
            flags.append(f"TRUNCATED {r['truncated']}/{r['seeds']} ({r['jobs_unfinished']} jobs unfinished)")
        if "pairing_error" in r:
            flags.append("UNPAIRED")
            notes.append(f"UNPAIRED {r['scenario']}/{r['policy']}: {r['pairing_error']}")
        table_rows.append({
            "scenario": r["scenario"], "policy": r["policy"], "seeds": str(r["seeds"]), "ratio": ratio, "wins": wins,
            "gap": fmt_gap(r.get("gap_best_known", math.nan), r.get("gap_best_known_lo", math.nan),
                           r.get("gap_best_known_hi", math.nan)) + suffix,
            "gap_bound": fmt_gap(r.get("gap_lower_bound", math.nan), r.get("gap_lower_bound_lo", math.nan),
                                 r.get("gap_lower_bound_hi", math.nan)) + suffix,
            "fallback": "-" if math.isnan(share) else f"{share:.1%}", "flags": "; ".join(flags),
            **{m: f"{format_value(r[m])} ± {format_value(r[m + '_std'])}"
               if m in r and (r["scenario"], m) not in absent else "-" for m in wanted}})
    several = len({r["scenario"] for r in rows}) > 1
    flagged = any(t["flags"] for t in table_rows)
    every = ["scenario", "policy", "seeds", first, "ratio", "wins", *(["gap", "gap_bound"] if gaps else []),
             "fallback", *(m for m in wanted if m != first), *(["flags"] if flagged else [])]

    def span(name: str) -> int:
        return max(len(heads[name]), *(len(t[name]) for t in table_rows)) if table_rows else len(heads[name])

    left_out: list[str] = []
    if columns is not None:
        shown = [*(["scenario"] if several or "scenario" in asked else []), "policy",
                 *(c for c in dict.fromkeys(asked) if c != "scenario" and (gaps or c not in ("gap", "gap_bound"))),
                 *(["flags"] if flagged else [])]
    elif width is not None:
        keep = {"policy", "flags", first, *(["scenario"] if several else [])}
        objectives = [m for m in wanted if m in OBJECTIVE_KEYS]
        candidates = [c for c in every if c != "scenario" or several]
        for name in ("ratio", "wins", "gap", *objectives, *_FIT_ORDER, *wanted):
            if name in candidates and name not in keep:
                trial = [c for c in every if c in keep or c == name]
                if sum(span(c) for c in trial) + 2 * (len(trial) - 1) <= width:
                    keep.add(name)
        shown = [c for c in candidates if c in keep]
        left_out = [c for c in candidates if c not in keep]
    else:
        shown = every
    header = [heads[c] for c in shown]
    cells = [[t[c] for c in shown] for t in table_rows]
    caption = table_caption(records, reference, paired_metric)
    gap_line = _gap_caption(rows)
    if gap_line:
        caption += "\n" + gap_line
    elif (columns is None or "gap" in asked) and rows and any(GAP_METRIC in r for r in records):
        notes.append(f"no gap to best-known: {no_gap_reason(records)}")
    if left_out:
        notes.append(f"left out to fit {width} characters: {', '.join(left_out)} ({left_out_hint})")
    if repeats:
        notes.append(f"REPEATED WINDOWS: seeds that play the same jobs count once in the ratio, its interval and "
                     f"the wins ({'; '.join(repeats)}); one distinct window gives no interval")
    if draws:
        notes.append(f"WORLD DRAWS: every seed plays one window, so each ratio's interval rests on that window's world "
                     f"draws, paired per (window, seed), not on windows ({'; '.join(draws)}): no verdict")
    if any(r["truncated"] for r in rows):
        notes.append("TRUNCATED: episodes cut by max_steps/max_time are not comparable; "
                     "they are left out of the ratios and their means cover unfinished episodes")
    if opposite:
        notes.append(f"MEANS VS RATIO: {paired_metric}: the means differ in direction from the paired geometric mean "
                     f"for {', '.join(opposite)}: a few windows with large values dominate the mean; the geometric "
                     "mean weighs each window equally")
    notes += verdict_notes(min(distinct) if distinct else 0, bool(distinct))
    if not markdown:
        notes = [_wrap(note, width) for note in notes]
        caption = _wrap(caption, width)
    if markdown:
        lines = [caption.replace("\n", "  \n"), "",
                 "| " + " | ".join(header) + " |",
                 "|" + "|".join("---" if c in ("scenario", "policy") else "---:" for c in shown) + "|"]
        lines += ["| " + " | ".join(c) + " |" for c in cells]
        return "\n".join(lines + [""] * bool(notes) + notes)
    widths = [span(c) for c in shown]
    left = [c in ("scenario", "policy") for c in shown]
    lines = [caption, "  ".join(h.ljust(w) if lj else h.rjust(w) for h, w, lj in zip(header, widths, left))]
    lines.append("  ".join("-" * w for w in widths))
    for c in cells:
        lines.append("  ".join(v.ljust(w) if lj else v.rjust(w) for v, w, lj in zip(c, widths, left)))
    return "\n".join(lines + notes)


def paired_verdict(records: Sequence[dict[str, Any]], policy: str, reference: Optional[str] = DEFAULT_REFERENCE,
                   metric: str = DEFAULT_METRIC) -> str:
    """One line: ``policy``'s paired ratio to ``reference`` (default the scenario's yardstick) with
    its interval and wins, and the verdict it supports (:func:`baselines.harness.stats.verdict`:
    none below 10 distinct windows), then the 100-window note where it applies."""
    from baselines.harness.stats import verdict

    s = paired_summary(records, policy, reference, metric)
    line = f"{policy}: {s.describe()}; {verdict(s)}"
    note = claim_note(s.distinct)
    return line + (f"\n{note}" if note else "")


def verdict_notes(distinct: int, paired: bool = True) -> list[str]:
    """The lines under a paired table on ``distinct`` windows (the fewest of its rows): no
    verdict below :data:`~baselines.harness.stats.MIN_VERDICT_WINDOWS`, and below
    :data:`~baselines.harness.stats.CLAIM_WINDOWS` that claims rest on 100."""
    if not paired:
        return []
    lines = []
    if distinct < MIN_VERDICT_WINDOWS:
        lines.append(f"NO VERDICT: the ratios rest on {distinct} distinct window{'s' * (distinct != 1)}; reading an "
                     f"interval as better/worse needs at least {MIN_VERDICT_WINDOWS} (the intervals are printed all the same)")
    note = claim_note(distinct)
    if note:
        lines.append(note)
    return lines


def write_summary_csv(records: Sequence[dict[str, Any]], path: "str | Path",
                      reference: Optional[str] = DEFAULT_REFERENCE,
                      paired_metrics: Sequence[str] = PAIRED_METRICS) -> Path:
    """One row per (scenario, policy): :func:`summarize`'s means, stds and paired ratios (of
    ``paired_metrics``; written atomically)."""
    from baselines.harness.files import atomic_write

    rows = summarize(records, reference=reference, paired_metrics=paired_metrics)
    fields = list(dict.fromkeys(k for r in rows for k in r))

    def write(f) -> None:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)

    return atomic_write(path, write, newline="")


def write_csv(records: Sequence[dict[str, Any]], path: "str | Path") -> Path:
    """One row per episode, every metric (written atomically: a failure keeps the old file)."""
    from baselines.harness.files import atomic_write

    def write(f) -> None:
        objectives = [k for k in OBJECTIVE_KEYS if any(k in r for r in records)]    # a scenario with them
        writer = csv.DictWriter(f, fieldnames=[*RECORD_KEYS, *objectives], extrasaction="ignore")
        writer.writeheader()
        writer.writerows(records)

    return atomic_write(path, write, newline="")


def write_json(records: Sequence[dict[str, Any]], path: "str | Path",
               paired_metrics: Sequence[str] = PAIRED_METRICS, **meta: Any) -> Path:
    """Episodes and their per-policy summary (paired on ``paired_metrics``), with ``meta``
    (scenario, seeds, versions...); written atomically (a failure, e.g. a full disk, keeps the old
    file)."""
    from baselines.harness.files import atomic_write

    reference = meta.get("reference", DEFAULT_REFERENCE)
    if reference == DEFAULT_REFERENCE:          # the files name the policy, not the rule that chose it
        meta = {**meta, "reference": resolve_reference(records, reference,
                                                       paired_metrics[0] if paired_metrics else DEFAULT_METRIC)}
    payload = {"meta": meta, "summary": summarize(records, reference=reference, paired_metrics=paired_metrics),
               "episodes": [dict(r) for r in records]}
    text = json_text(payload)            # standard JSON: NaN is written as null
    return atomic_write(path, lambda f: f.write(text))
