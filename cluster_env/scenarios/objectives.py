"""Derivation rules of the service-objective scenarios (``philly-slo-v1``, ``philly-tenants-v1``).

The Philly trace carries no job class, deadline or quota. These scenarios derive them from the
trace by the documented rules below (docs/objectives.md, "Derived fields"), once for the whole
trace with a fixed seed, so one job has the same class and deadline in every window, at every
load and in every split; windows, loads, seeds and splits are then handled as in every scenario.

* Deadlines and classes (``philly-slo-v1``): a share :data:`DEADLINE_SHARE` of the jobs are
  high-priority jobs with a deadline, the rest best-effort without one (TIAS' two levels, deadline
  jobs and the rest). A deadline job must finish within ``k x duration`` of its submission, with
  ``k`` drawn uniformly from :data:`DEADLINE_FACTOR_RANGE` (the ``submit + k x duration`` form of
  deadline-aware schedulers' evaluations, e.g. TIAS and UniSched; the share and the range of ``k``
  are ASSUMPTIONS of this project: the papers' exact draws were not available to check).
  ``duration`` is the job's work at the reference GPU's speed, so a deadline is tight on the slow
  GPU types.
* Tenants and quotas (``philly-tenants-v1``): tenants are Philly's virtual clusters (the trace's
  ``vc`` column; the tenant index every Philly scenario already carries); each tenant's guaranteed
  GPU share is proportional to its GPU-time (GPUs x duration) in the *training* split, the share an
  operator would set from history without seeing the test jobs; every tenant may borrow idle GPUs
  (the quota is reclaimable by preemption). The proportional rule is ASSUMED (PPS and Astraea set
  quotas per tenant; proportional-to-usage is the simplest rule the trace supports).
* Published deadlines (:func:`with_chronus_deadlines`): a share :data:`CHRONUS_DEADLINE_SHARE` of
  the jobs get a deadline ``k x duration`` after submission with ``k`` drawn from the empirical
  distribution of ``k`` in the Chronus artifact's Philly trace :data:`CHRONUS_DEADLINE_TRACE`
  (Gao et al., SoCC'21), shipped as its quantile function in :data:`CHRONUS_FACTORS_FILE`
  (provenance: ``cluster_env/data/chronus/SOURCES.md``); the rest best-effort. The share and the
  distribution of ``k`` are published figures; drawing ``k`` independently of the job's duration
  is an ASSUMPTION (in the published traces ``k`` falls with duration: docs/objectives.md).
"""
from __future__ import annotations

import csv
import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Optional

import numpy as np

from cluster_env.core.instance import Workload
from cluster_env.core.objectives import BEST_EFFORT, HIGH_PRIORITY
from cluster_env.errors import DataError

#: Share of jobs that are high-priority with a deadline (ASSUMPTION, see the module docstring).
DEADLINE_SHARE = 0.3
#: ``k`` of ``deadline = submit + k x duration``, drawn uniformly (ASSUMPTION).
DEADLINE_FACTOR_RANGE = (1.5, 3.0)
#: Seed of the per-job draws (fixed: a job's class and deadline do not depend on the window).
DERIVATION_SEED = 36
#: Jobs per episode of the objective scenarios (API episodes: their metrics need the API path).
OBJECTIVE_JOBS_PER_EPISODE = 300

#: Figures derived from the Chronus artifact's Philly traces (``SOURCES.md`` there; regenerated
#: byte for byte by ``benchmarks/derive_chronus_deadlines.py`` from the raw traces).
CHRONUS_DATA_DIR = Path(__file__).resolve().parent.parent / "data" / "chronus"
#: The empirical quantile function of ``k = (deadline - submit) / duration`` over each trace's SLO
#: jobs: columns ``trace,percentile,k``, percentiles 0, 1, ..., 100 per trace.
CHRONUS_FACTORS_FILE = CHRONUS_DATA_DIR / "deadline_factors.csv"
#: Per trace: jobs, SLO share, and the Spearman correlation of ``k`` with duration, GPUs, submit.
CHRONUS_TRACES_FILE = CHRONUS_DATA_DIR / "traces.csv"
#: Per trace and duration band (minutes): the SLO jobs' ``k`` at the 10th, 50th and 90th percentiles.
CHRONUS_BANDS_FILE = CHRONUS_DATA_DIR / "k_by_duration.csv"
#: The trace whose ``k`` :func:`with_chronus_deadlines` draws: MIX1, SLO jobs with one hard
#: deadline each and best-effort jobs, the two classes this package models (SLO has no
#: best-effort jobs; MIX2's soft jobs have several deadlines of decreasing value).
CHRONUS_DEADLINE_TRACE = "MIX1"
#: MIX1's share of SLO jobs: 0.7 nominal (21,724 of 30,940 jobs, 0.7021, are SLO jobs).
CHRONUS_DEADLINE_SHARE = 0.7


# Parsers of the shipped tables' cells: each raises ValueError("is ...") with the reason.
def _text(v: str) -> str:
    if not v.strip():
        raise ValueError("is empty")
    return v


def _integer(v: str) -> int:
    try:
        return int(v)
    except ValueError:
        raise ValueError("is not an integer") from None


def _count(v: str) -> int:
    n = _integer(v)
    if n < 0:
        raise ValueError("is negative")
    return n


def _number(v: str) -> float:
    try:
        x = float(v)
    except ValueError:
        raise ValueError("is not a number") from None
    if not math.isfinite(x):
        raise ValueError("is not finite")
    return x


def _factor(v: str) -> float:
    x = _number(v)
    if x < 1:
        raise ValueError("is below 1 (a deadline before the job could finish)")
    return x


def _percentile(v: str) -> int:
    p = _integer(v)
    if not 0 <= p <= 100:
        raise ValueError("is outside 0-100")
    return p


def _optional_count(v: str) -> Optional[int]:
    return None if v == "" else _count(v)


_TABLES: dict[str, dict[str, Callable[[str], object]]] = {
    "deadline_factors.csv": {"trace": _text, "percentile": _percentile, "k": _factor},
    "traces.csv": {"trace": _text, "path": _text, "jobs": _count, "slo_jobs": _count, "strict_jobs": _count,
                   "soft_jobs": _count, "best_effort_jobs": _count, "slo_share": _number,
                   "spearman_k_duration": _number, "spearman_k_gpus": _number, "spearman_k_submit": _number},
    "k_by_duration.csv": {"trace": _text, "duration_min_lo": _count, "duration_min_hi": _optional_count,
                          "slo_jobs": _count, "k_p10": _factor, "k_p50": _factor, "k_p90": _factor},
}


def read_chronus_table(path: Path | str) -> list[dict]:
    """The rows of one of the shipped Chronus tables (chosen by the file's name), typed and checked:
    a malformed file raises :class:`~cluster_env.errors.DataError` naming the file, the 1-based data
    row and the field."""
    path = Path(path)
    columns = _TABLES.get(path.name)
    if columns is None:
        raise DataError(f"not one of the Chronus tables {sorted(_TABLES)}", file=str(path))
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise DataError(f"cannot be read ({exc.strerror or exc})", file=str(path)) from None
    reader = csv.reader(text.splitlines())
    header = next(reader, None)
    if header != list(columns):
        raise DataError(f"header is {header}, expected {list(columns)}", file=str(path))
    rows = []
    for i, cells in enumerate(reader, start=1):
        if len(cells) != len(columns):
            raise DataError(f"has {len(cells)} fields, expected {len(columns)}", file=str(path), row=i)
        row = {}
        for (name, parse), cell in zip(columns.items(), cells):
            try:
                row[name] = parse(cell)
            except ValueError as exc:
                raise DataError(f"{cell!r} {exc}", file=str(path), row=i, field=name) from None
        rows.append(row)
    if not rows:
        raise DataError("has no data rows", file=str(path))
    return rows


@dataclass(frozen=True)
class DeadlineFactors:
    """An empirical distribution of the deadline factor ``k``: its quantile function at
    ``percentiles`` (0 to 100, increasing), read between them by linear interpolation."""

    trace: str
    percentiles: np.ndarray        # (P,) float64, 0 ... 100
    k: np.ndarray                  # (P,) float64, non-decreasing
    source: str

    def quantile(self, u: np.ndarray) -> np.ndarray:
        """``k`` at probabilities ``u`` in [0, 1] (inverse-CDF sampling when ``u`` is uniform)."""
        return np.interp(np.asarray(u, dtype=np.float64) * 100.0, self.percentiles, self.k)


def load_deadline_factors(trace: str = CHRONUS_DEADLINE_TRACE,
                          path: Path | str = CHRONUS_FACTORS_FILE) -> DeadlineFactors:
    """The quantile function of ``k`` of one trace in ``path`` (default: the shipped file), checked:
    percentiles 0, 1, ..., 100 each once in order and ``k`` non-decreasing; a malformed file raises
    :class:`~cluster_env.errors.DataError` naming the file, the data row and the field."""
    path = Path(path)
    rows = read_chronus_table(path)
    found = [(i, r) for i, r in enumerate(rows, start=1) if r["trace"] == trace]
    if not found:
        raise DataError(f"no rows of trace {trace!r} (traces: {sorted({r['trace'] for r in rows})})", file=str(path))
    for n, (i, r) in enumerate(found):
        if r["percentile"] != n:
            raise DataError(f"percentile {r['percentile']} of trace {trace!r}, expected {n} "
                            f"(0, 1, ..., 100 in order)", file=str(path), row=i, field="percentile")
        if n and r["k"] < found[n - 1][1]["k"]:
            raise DataError(f"k {r['k']} of trace {trace!r} is below the previous percentile's "
                            f"{found[n - 1][1]['k']} (a quantile function does not decrease)",
                            file=str(path), row=i, field="k")
    if len(found) != 101:
        raise DataError(f"trace {trace!r} has percentiles 0-{len(found) - 1}, expected 0-100", file=str(path),
                        row=found[-1][0], field="percentile")
    percentiles = np.array([r["percentile"] for _, r in found], dtype=np.float64)
    k = np.array([r["k"] for _, r in found], dtype=np.float64)
    percentiles.flags.writeable = k.flags.writeable = False
    return DeadlineFactors(trace=trace, percentiles=percentiles, k=k, source=str(path))


def with_deadlines(trace: Workload, share: float = DEADLINE_SHARE,
                   factors: tuple[float, float] = DEADLINE_FACTOR_RANGE, seed: int = DERIVATION_SEED) -> Workload:
    """``trace`` with classes and deadlines by the rule of the module docstring."""
    rng = np.random.default_rng(seed)
    n = trace.num_jobs
    chosen = rng.random(n) < share
    k = rng.uniform(factors[0], factors[1], n)
    job_class = np.where(chosen, HIGH_PRIORITY, BEST_EFFORT).astype(np.int64)
    deadline = np.where(chosen, k * trace.duration, np.nan)
    return replace(trace, name=trace.name + "+deadlines", job_class=job_class, deadline=deadline)


def with_quotas(trace: Workload, train: tuple[float, float]) -> Workload:
    """``trace`` with tenant quotas proportional to the tenants' GPU-time in the ``train`` split
    (fractions of the jobs), every tenant allowed to borrow."""
    lo, hi = int(round(train[0] * trace.num_jobs)), int(round(train[1] * trace.num_jobs))
    tenants = trace.num_tenants
    work = np.bincount(trace.tenant[lo:hi], weights=(trace.gpus * trace.duration)[lo:hi], minlength=tenants)
    quota = work / work.sum()
    return replace(trace, name=trace.name + "+quotas", tenant_quota=quota.astype(np.float64),
                   tenant_borrow=np.ones(tenants, dtype=bool))


def with_chronus_deadlines(trace: Workload, share: float = CHRONUS_DEADLINE_SHARE, seed: int = DERIVATION_SEED,
                           factors: Optional[DeadlineFactors] = None) -> Workload:
    """``trace`` with a share ``share`` of high-priority jobs due ``k x duration`` after submission,
    ``k`` drawn by inverse-CDF sampling from ``factors`` (default: the shipped distribution of
    :data:`CHRONUS_DEADLINE_TRACE`), the rest best-effort; one generator seeded ``seed`` draws
    every job's class and ``k`` once for the whole trace, as :func:`with_deadlines` does."""
    if not 0.0 <= share <= 1.0:
        raise ValueError(f"share must be in [0, 1], got {share}")
    factors = load_deadline_factors() if factors is None else factors
    rng = np.random.default_rng(seed)
    n = trace.num_jobs
    chosen = rng.random(n) < share
    k = factors.quantile(rng.random(n))
    job_class = np.where(chosen, HIGH_PRIORITY, BEST_EFFORT).astype(np.int64)
    deadline = np.where(chosen, k * trace.duration, np.nan)
    return replace(trace, name=trace.name + "+chronus-deadlines", job_class=job_class, deadline=deadline)
