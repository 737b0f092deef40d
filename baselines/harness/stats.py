"""Paired, normalised statistics: each policy against a reference on the same windows.

Windows (a scenario, split, seed and environment settings: one sampled workload) differ far more
from each other than schedulers do, so a mean ± std over a handful of windows measures the
windows. Here every policy is compared with a reference policy *on the same window*: per window
the ratio ``policy / reference`` of a metric, summarised over windows by

* the geometric mean of the ratios, with a 95% bootstrap confidence interval
  (``scipy.stats.bootstrap`` on the log ratios, seeded, BCa);
* the win rate: the fraction of windows where the policy is strictly better than the reference
  (lower is better for times, fees, energy and preemptions; higher for utilisation, throughput,
  fairness and finished jobs).

Rules, so that nothing is mixed silently:

* records are paired by :func:`window_key`; a window that one side has and the other lacks, or a
  window a policy ran twice, raises :class:`PairingError` naming them;
* the unit of the interval and of the win rate is the *distinct window*: the jobs an episode
  played (the record's ``window``, a digest of its workload, with its scenario, split and
  settings). Seeds that play the same jobs (every seed of ``toy-v0``, or of a user's trace
  without ``jobs_per_episode``) are one window: their log ratios are averaged into one value
  before the bootstrap, so identical episodes never pass for independent evidence, and
  ``distinct`` says how many windows the interval rests on. Records without ``window`` (from
  older files) count one window per seed;
* except where every seed plays ONE window (a user's trace without ``jobs_per_episode``, every
  seed of ``toy-v0``): the seeds are that window's world draws (fluctuation, static factors,
  restart costs), and they are paired per (window, seed): the interval then says how the ratio
  varies over world draws of this one window, ``unit`` says so, and no verdict is drawn from it;
* a verdict ("better"/"worse", :func:`verdict`) needs :data:`MIN_VERDICT_WINDOWS` distinct windows
  and an interval that excludes 1; below :data:`CLAIM_WINDOWS` windows a claim still rests on a
  run over 100 (docs/design.md section 9, :func:`claim_note`);
* a window where either run was truncated (``record["truncated"]``) is left out of the ratios
  and counted in ``truncated``;
* a window where either value is NaN or not positive (a log ratio is undefined) is left out of the
  ratios and counted in ``undefined``;
* with fewer than two ratios the interval is ``(nan, nan)``; when every ratio is the same the
  interval is that value (a bootstrap of constant data has no spread).
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Iterable, Optional, Sequence

import numpy as np

from baselines.harness.files import number
from baselines.yardstick import JCT_METRIC

#: Metrics where a larger value is better; every other metric is better when smaller.
HIGHER_IS_BETTER = frozenset({"jobs_finished", "gpu_utilization", "fairness", "jobs_per_hour", "deadline_attainment"})
#: The record fields that identify a window.
WINDOW_FIELDS = ("scenario", "split", "seed", "env")
#: A paired table's reference when none is given: each scenario's yardstick on the table's metric
#: (:func:`baselines.yardstick.yardstick`), resolved from the records' scenario.
DEFAULT_REFERENCE = "yardstick"
#: The metric a paired table or comparison is on unless told another: average JCT.
DEFAULT_METRIC = JCT_METRIC
CONFIDENCE = 0.95
#: Fewest distinct windows a "better"/"worse" verdict is drawn from (the interval is printed below it).
MIN_VERDICT_WINDOWS = 10
#: Distinct test windows a claim that one scheduler beats another rests on (docs/design.md section 9).
CLAIM_WINDOWS = 100
#: The units of a paired interval: distinct windows, or one window's world draws (its seeds).
UNIT_WINDOW, UNIT_WORLD_DRAW = "window", "world draw (window, seed)"


class PairingError(ValueError):
    """Records that cannot be paired window by window."""


def window_key(record: dict[str, Any]) -> tuple:
    """(scenario, split, seed, env): the identity of the window a record ran on (a record without
    scenario, split or seed cannot be paired: :class:`PairingError`)."""
    missing = [k for k in ("scenario", "split", "seed") if k not in record]
    if missing:
        raise PairingError(f"a record of policy {record.get('policy')!r} has no {', '.join(missing)}: "
                           "it cannot be paired with another policy's window")
    return (str(record["scenario"]), str(record["split"]), int(record["seed"]), str(record.get("env", "")))


def lower_is_better(metric: str) -> bool:
    return metric not in HIGHER_IS_BETTER


@dataclass
class PairedSummary:
    """``policy`` against ``reference`` on ``metric``, over the windows both ran completely."""

    policy: str
    reference: str
    metric: str
    n: int                              # windows in the ratios
    geo_mean: float                     # geometric mean of policy/reference
    ci_low: float                       # 95% bootstrap interval of the geometric mean
    ci_high: float
    win_rate: float                     # fraction of the n windows where the policy is strictly better
    mean: float                         # the policy's plain mean over the n windows
    reference_mean: float               # the reference's plain mean over the same windows
    truncated: int = 0                  # windows left out: either run truncated
    undefined: int = 0                  # windows left out: NaN or non-positive value
    windows: list[tuple] = field(default_factory=list)     # window keys of the ratios, sorted
    ratios: list[float] = field(default_factory=list)      # per window, same order
    distinct: int = 0                   # distinct windows (jobs played) among the n
    units: int = 0                      # values the interval and the win rate rest on
    unit: str = UNIT_WINDOW             # what one of them is: a distinct window, or one window's world draw

    @property
    def significant(self) -> bool:
        """The interval excludes 1: the policy is better (or worse) on these windows."""
        return not math.isnan(self.ci_low) and (self.ci_high < 1.0 or self.ci_low > 1.0)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["windows"] = [list(w) for w in self.windows]
        return d

    @property
    def wins(self) -> int:
        """Units (distinct windows, or one window's world draws) where the policy is better."""
        return round(self.win_rate * self.units) if self.units else 0

    def windows_text(self) -> str:
        """``20 windows``, ``20 episodes on 2 distinct windows`` when seeds repeat windows, or
        ``20 world draws of 1 window`` when every seed plays one window."""
        if self.unit == UNIT_WORLD_DRAW:
            return f"{self.units} world draws of 1 window"
        if self.distinct == self.n:
            return f"{self.n} windows"
        return f"{self.n} episodes on {self.distinct} distinct window{'s' * (self.distinct != 1)}"

    def describe(self) -> str:
        """``0.781x fifo [0.702, 0.866], wins 17/20 (avg_jct, 20 windows)``."""
        text = (f"{fmt_ratio(self.geo_mean)}x {self.reference} {fmt_interval(self.ci_low, self.ci_high)}, "
                f"wins {self.wins}/{self.units} ({self.metric}, {self.windows_text()}")
        if self.truncated:
            text += f", {self.truncated} truncated left out"
        if self.undefined:
            text += f", {self.undefined} undefined left out"
        return text + ")"


def fmt_ratio(value: float) -> str:
    return "nan" if math.isnan(value) else f"{value:.3f}"


def fmt_interval(lo: float, hi: float) -> str:
    return f"[{fmt_ratio(lo)}, {fmt_ratio(hi)}]"


def geo_mean_ci(ratios: Sequence[float], confidence: float = CONFIDENCE, n_resamples: int = 4999,
                seed: int = 0) -> tuple[float, float, float]:
    """Geometric mean of positive ``ratios`` and its bootstrap interval (BCa on the log ratios).

    Returns ``(nan, nan, nan)`` for no ratio, ``(g, nan, nan)`` for one, ``(g, g, g)`` when all
    are equal. Raises on a non-positive or NaN ratio (filter those first).
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        logs = np.log(np.asarray(ratios, dtype=np.float64))
    if not np.all(np.isfinite(logs)):
        raise ValueError("ratios must be positive and finite")
    if len(logs) == 0:
        return math.nan, math.nan, math.nan
    g = float(np.exp(logs.mean()))
    if len(logs) < 2:
        return g, math.nan, math.nan
    if np.all(logs == logs[0]):
        return g, g, g
    lo, hi = _bootstrap_mean(logs, confidence, n_resamples, seed)
    return g, float(np.exp(lo)), float(np.exp(hi))


def index_by_window(records: Iterable[dict[str, Any]], policy: str) -> dict[tuple, dict[str, Any]]:
    """``policy``'s records by window key; a window run twice is a :class:`PairingError`."""
    out: dict[tuple, dict[str, Any]] = {}
    for r in records:
        if r["policy"] != policy:
            continue
        key = window_key(r)
        if key in out:
            raise PairingError(f"policy {policy!r} has two records for window {_show(key)}")
        out[key] = r
    return out


def _show(key: tuple) -> str:
    scenario, split, seed, env = key
    return f"{scenario}/{split} seed {seed}" + (f" [{env}]" if env else "")


def _check_same_windows(policy: str, reference: str, a: dict, b: dict) -> None:
    only_a, only_b = sorted(set(a) - set(b)), sorted(set(b) - set(a))
    if only_a or only_b:
        parts = []
        if only_a:
            parts.append(f"{len(only_a)} window(s) only {policy!r} ran, e.g. {_show(only_a[0])}")
        if only_b:
            parts.append(f"{len(only_b)} window(s) only {reference!r} ran, e.g. {_show(only_b[0])}")
        raise PairingError(f"cannot pair {policy!r} with {reference!r}: " + "; ".join(parts))


def resolve_reference(records: Sequence[dict[str, Any]], reference: Optional[str],
                      metric: str = DEFAULT_METRIC) -> Optional[str]:
    """The policy label ``reference`` means: :data:`DEFAULT_REFERENCE` is the yardstick on
    ``metric`` of the records' scenario (:func:`baselines.yardstick.yardstick_of_records`; None
    when they span scenarios with different yardsticks), anything else itself."""
    if reference != DEFAULT_REFERENCE:
        return reference
    from baselines.yardstick import yardstick_of_records

    return yardstick_of_records(records, metric)


def paired_summary(records: Sequence[dict[str, Any]], policy: str, reference: str = DEFAULT_REFERENCE,
                   metric: str = DEFAULT_METRIC, seed: int = 0) -> PairedSummary:
    """``policy`` against ``reference`` (default: the scenario's yardstick on ``metric``) on
    ``metric`` over their common windows (which must be the same set: see :class:`PairingError`)."""
    resolved = resolve_reference(records, reference, metric)
    if resolved is None:
        raise PairingError("the records span scenarios with different yardsticks: name the reference")
    reference = resolved
    mine, ref = index_by_window(records, policy), index_by_window(records, reference)
    if not ref:
        raise PairingError(f"no record of the reference policy {reference!r}")
    if not mine:
        raise PairingError(f"no record of policy {policy!r}")
    _check_same_windows(policy, reference, mine, ref)
    lower = lower_is_better(metric)
    windows, ratios, values, refs = [], [], [], []
    units: dict[tuple, list[tuple[float, int]]] = {}     # distinct window -> [(ratio, better?)]
    truncated = undefined = 0
    for key in sorted(mine):
        a, b = mine[key], ref[key]
        if a.get("truncated") or b.get("truncated"):
            truncated += 1
            continue
        va, vb = number(a[metric]), number(b[metric])      # null in our JSON files is NaN
        if not (va > 0 and vb > 0 and math.isfinite(va) and math.isfinite(vb)):
            undefined += 1
            continue
        windows.append(key)
        ratios.append(va / vb)
        values.append(va)
        refs.append(vb)
        units.setdefault(distinct_window(a, b, policy, reference), []).append(
            (va / vb, int((va < vb) if lower else (va > vb))))
    unit = UNIT_WINDOW
    if len(units) == 1 and len(ratios) > 1:      # one window, its seeds' world draws: paired per (window, seed)
        unit = UNIT_WORLD_DRAW
        units = {(key, i): [member] for key, members in units.items() for i, member in enumerate(members)}
    distinct = len({key[0] if unit == UNIT_WORLD_DRAW else key for key in units})
    unit_ratios, unit_wins = [], 0
    for members in units.values():
        if len(members) == 1:                # the ratio itself: no rounding through log and exp
            ratio, better = members[0]
        else:
            mean_log = float(np.mean(np.log([r for r, _ in members])))
            ratio, better = math.exp(mean_log), int(mean_log < 0 if lower else mean_log > 0)
        unit_ratios.append(ratio)
        unit_wins += better
    g, lo, hi = geo_mean_ci(unit_ratios, seed=seed)
    n, d = len(ratios), len(unit_ratios)
    return PairedSummary(policy, reference, metric, n, g, lo, hi, unit_wins / d if d else math.nan,
                         float(np.mean(values)) if n else math.nan, float(np.mean(refs)) if n else math.nan,
                         truncated, undefined, windows, ratios, distinct, d, unit)


def direction_note(mean: float, reference_mean: float, geo_mean: float, who: str = "") -> Optional[str]:
    """One sentence where the plain means and the geometric mean of the paired ratios point
    different ways (``mean / reference_mean`` below 1 and ``geo_mean`` above, or the reverse),
    else None. ``who`` names the rows it is about (a table's), e.g. ``" (quota)"``."""
    values = (mean, reference_mean, geo_mean)
    if not all(math.isfinite(v) for v in values) or reference_mean <= 0 or geo_mean <= 0:
        return None
    plain = mean / reference_mean
    if (plain - 1.0) * (geo_mean - 1.0) >= 0.0:     # the same way, or one of them even
        return None
    return (f"the means differ in direction from the paired geometric mean{who} (ratio of the means "
            f"{plain:.4f}, geometric mean of the per-window ratios {geo_mean:.4f}): a few windows with large "
            "values dominate the mean; the geometric mean weighs each window equally")


def verdict(s: PairedSummary) -> str:
    """The one-line verdict of a paired summary: "better"/"worse" only on at least
    :data:`MIN_VERDICT_WINDOWS` distinct windows with an interval that excludes 1; otherwise why
    there is none (the interval is printed all the same)."""
    a = s.policy
    if s.units < 2:
        return (f"{s.units} {'value' if s.units == 1 else 'values'} to pair: no interval, no verdict (an interval "
                "needs at least two distinct windows; give more seeds, e.g. --seeds 0-19)")
    if s.distinct < MIN_VERDICT_WINDOWS:
        why = (f"the interval rests on {s.windows_text()}, not on windows" if s.unit == UNIT_WORLD_DRAW
               else f"{s.distinct} distinct window{'s' * (s.distinct != 1)}")
        return f"no verdict: {why}; a verdict needs at least {MIN_VERDICT_WINDOWS} distinct windows"
    if not s.significant:
        return "the interval contains 1 (or is undefined): no difference shown on these windows"
    better = (s.ci_high < 1) == lower_is_better(s.metric)
    return f"the interval excludes 1: {a} is {'better' if better else 'worse'}"


def claim_note(distinct: int) -> Optional[str]:
    """The line a result on fewer than :data:`CLAIM_WINDOWS` distinct windows carries, else None."""
    if distinct >= CLAIM_WINDOWS:
        return None
    return (f"{distinct} distinct window{'s' * (distinct != 1)}: a claim that one scheduler beats another rests on "
            f"{CLAIM_WINDOWS} test windows against the yardstick (docs/design.md section 9; e.g. --seeds 0-{CLAIM_WINDOWS - 1})")


def distinct_window(a: dict[str, Any], b: dict[str, Any], policy: str = "", reference: str = "") -> tuple:
    """The distinct window two paired records played: (scenario, split, env, the jobs' digest);
    without a ``window`` field, the seed stands for it. Records of one seed that played different
    jobs cannot be paired (:class:`PairingError`)."""
    key = window_key(a)
    if "window" not in a or "window" not in b:
        return key
    if a["window"] != b["window"]:
        raise PairingError(f"{policy!r} and {reference!r} played different jobs on {_show(key)} "
                           f"(window {a['window']} vs {b['window']}): they cannot be paired")
    return (key[0], key[1], key[3], str(a["window"]))


def paired_table(records: Sequence[dict[str, Any]], reference: str = DEFAULT_REFERENCE,
                 metric: str = DEFAULT_METRIC, policies: Optional[Sequence[str]] = None,
                 seed: int = 0) -> dict[str, PairedSummary]:
    """:func:`paired_summary` of every policy (in first-seen order; the reference included, at
    ratio 1) against ``reference`` (default: the scenario's yardstick on ``metric``)."""
    names = list(policies) if policies is not None else list(dict.fromkeys(r["policy"] for r in records))
    reference = resolve_reference(records, reference, metric) or reference
    return {p: paired_summary(records, p, reference, metric, seed) for p in names}


def window_values(records: Sequence[dict[str, Any]], metric: str) -> tuple[list[float], str]:
    """The values a mean's interval over ``records`` (one policy's, one setting) rests on, and their
    unit, by the rules of :func:`paired_summary`: one value per distinct window (the mean of the
    seeds that played it), or, where every seed played one window, one per seed (its world draws)."""
    groups: dict[str, list[float]] = {}
    for r in records:
        groups.setdefault(str(r.get("window", f"seed {r.get('seed')}")), []).append(number(r[metric]))
    if len(groups) == 1 and len(records) > 1:
        return [v for values in groups.values() for v in values], UNIT_WORLD_DRAW
    return [float(np.mean(values)) for values in groups.values()], UNIT_WINDOW


def truncation(records: Sequence[dict[str, Any]], policy: str) -> tuple[int, int, int]:
    """(truncated episodes, episodes, unfinished jobs in them) of ``policy``."""
    mine = [r for r in records if r["policy"] == policy]
    bad = [r for r in mine if r.get("truncated")]
    return len(bad), len(mine), int(sum(int(r.get("jobs_unfinished", 0)) for r in bad))


def mean_ci(values: Sequence[float], confidence: float = CONFIDENCE, n_resamples: int = 4999,
            seed: int = 0) -> tuple[float, float, float]:
    """Mean of ``values`` (NaNs dropped) with a bootstrap interval over them (BCa, seeded); the
    same conventions as :func:`geo_mean_ci` for fewer than two or identical values."""
    x = np.asarray(values, dtype=np.float64)
    x = x[np.isfinite(x)]
    if len(x) == 0:
        return math.nan, math.nan, math.nan
    m = float(x.mean())
    if len(x) < 2:
        return m, math.nan, math.nan
    if np.all(x == x[0]):
        return m, m, m
    lo, hi = _bootstrap_mean(x, confidence, n_resamples, seed)
    return m, lo, hi


def share_ci(parts: Sequence[float], totals: Sequence[float], confidence: float = CONFIDENCE,
             n_resamples: int = 4999, seed: int = 0) -> tuple[float, float, float]:
    """``sum(parts) / sum(totals)`` over paired units (e.g. a group's and the whole excess JCT per
    window) with a bootstrap interval that resamples the units (BCa, else percentile; seeded).
    The same conventions as :func:`geo_mean_ci` for fewer than two units; ValueError for unpaired,
    non-finite input or totals that sum to zero."""
    a, b = np.asarray(parts, dtype=np.float64), np.asarray(totals, dtype=np.float64)
    if a.shape != b.shape or a.ndim != 1 or not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
        raise ValueError("parts and totals must be finite and paired (one of each per unit)")
    if len(a) == 0:
        return math.nan, math.nan, math.nan
    if b.sum() == 0:
        raise ValueError("the totals sum to zero: no share")
    share = float(a.sum() / b.sum())
    if len(a) < 2:
        return share, math.nan, math.nan
    if np.all(a == a[0]) and np.all(b == b[0]):
        return share, share, share
    import warnings

    from scipy.stats import bootstrap

    def ratio(x, y, axis=-1):
        return x.sum(axis=axis) / y.sum(axis=axis)

    lo = hi = math.nan
    for method in ("BCa", "percentile"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = bootstrap((a, b), ratio, paired=True, confidence_level=confidence, n_resamples=n_resamples,
                            method=method, vectorized=True, axis=-1, random_state=np.random.default_rng(seed))
        lo, hi = float(res.confidence_interval.low), float(res.confidence_interval.high)
        if math.isfinite(lo) and math.isfinite(hi):
            break
    return share, lo, hi


def _bootstrap_mean(x: np.ndarray, confidence: float, n_resamples: int, seed: int) -> tuple[float, float]:
    """Bootstrap interval of the mean of ``x`` (two or more values, not all equal): BCa, or the
    percentile interval where BCa is degenerate (e.g. two values)."""
    import warnings

    try:
        from scipy.stats import bootstrap
    except ImportError as exc:  # pragma: no cover - scipy is a core dependency
        raise ImportError("paired statistics need scipy: pip install scipy") from exc
    lo = hi = math.nan
    for method in ("BCa", "percentile"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")          # BCa's degenerate-data warning: handled below
            res = bootstrap((x,), np.mean, confidence_level=confidence, n_resamples=n_resamples, method=method,
                            vectorized=True, axis=-1, random_state=np.random.default_rng(seed))
        lo, hi = float(res.confidence_interval.low), float(res.confidence_interval.high)
        if math.isfinite(lo) and math.isfinite(hi):
            break
    return lo, hi
