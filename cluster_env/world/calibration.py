"""Calibration of the fluctuation model to the Alibaba PAI mini-batch-time data.

Data (packaged in ``cluster_env/data/pai/``, CC BY 4.0, AntMan OSDI'20; see ``SOURCES.md``):

* ``coefficient_variation.csv``: 100 distributed training jobs with 10 workers each; for every
  iteration (up to 2,000 a job, 203 at least) the coefficient of variation (CoV) of the mini-batch
  time across the 10 workers.  The values reach 3.147, above the largest CoV ten numbers can have
  with the population standard deviation (sqrt(9) = 3), but below the bound with the sample
  standard deviation (sqrt(10) = 3.162): the CoV uses the sample standard deviation (ddof = 1),
  and so do the simulated statistics here.  The first iteration (column 0) is a warm-up and is
  dropped.
* ``job_{1..4}_norm.csv``: per-worker normalised mini-batch times of four jobs, sampled every
  ~10 iterations (the ``time`` column).

:func:`pai_targets` computes the statistics the defaults are calibrated to;
:func:`simulate_worker_statistics` computes the same statistics on simulated workers (each worker
on its own machine, with a static factor and a :class:`~cluster_env.world.fluctuation.
FluctuationProcess`; mini-batch time = 1 / (static * dynamic)).

Calibrated statistics (keys of both dicts) and tolerances used by the tests:

* ``median_cov``: median CoV over all job-iterations (typical imbalance)            +-15 %
* ``frac_cov_above``: fraction of job-iterations with CoV > 0.5 (straggler frequency;
  0.5 is what one worker 2.85x slower than nine equal ones gives)                       +-15 %
* ``median_cov_when_above``: median CoV among those iterations (straggler severity) +-15 %
* ``frac_jobs_never_above``: fraction of jobs whose whole recorded window has no iteration with
  CoV > 0.5 (persistence of straggler episodes; simulated over the data's own window lengths)
  +-0.1 absolute

Reported, not calibrated (the model cannot match them all; see ``docs/world_model.md``):
``mean_cov`` (dominated by a few jobs with one worker up to ~100x slower), ``median_cov_when_below``,
``frac_jobs_never_above_200`` (the same as ``frac_jobs_never_above`` over the first 200
iterations of every job), and, from the four per-worker files, ``frac_worker_iters_slow`` (fraction
of worker-iterations slower than 1.5x the iteration's median), per job in ``per_job_frac_slow``.
Calibration inputs from jobs 1-3: ``static_std_log``, ``dynamic_std_log``,
``correlation_time_iterations``.
"""
from __future__ import annotations

import csv
import functools
import gzip
import math
from pathlib import Path
from typing import Dict, Optional, Sequence, Tuple

import numpy as np

from cluster_env.world.fluctuation import (
    SECONDS_PER_ITERATION, FluctuationParams, FluctuationProcess, draw_static_factors,
)

__all__ = [
    "PAI_DATA_DIR",
    "STRAGGLER_COV_THRESHOLD",
    "SLOW_WORKER_THRESHOLD",
    "PERSISTENCE_WINDOW",
    "pai_targets",
    "simulate_worker_statistics",
    "cov_of_single_straggler",
]

PAI_DATA_DIR = Path(__file__).resolve().parent.parent / "data" / "pai"

#: An iteration counts as a straggler iteration when the CoV across workers exceeds this.
STRAGGLER_COV_THRESHOLD = 0.5
#: A worker-iteration counts as slow when its time exceeds this multiple of the iteration median.
SLOW_WORKER_THRESHOLD = 1.5
#: Window (iterations) of the secondary persistence statistic ``frac_jobs_never_above_200``.
PERSISTENCE_WINDOW = 200


def cov_of_single_straggler(time_multiplier: float, n_workers: int = 10) -> float:
    """CoV (sample std / mean) of ``n_workers - 1`` equal times and one ``time_multiplier`` x
    slower."""
    t = np.ones(n_workers)
    t[-1] = time_multiplier
    return float(np.std(t, ddof=1) / np.mean(t))


@functools.lru_cache(maxsize=1)
def _cov_matrix() -> np.ndarray:
    """(100 jobs, 1999 iterations) CoV, NaN past a job's end; column 0 (warm-up) dropped."""
    with gzip.open(PAI_DATA_DIR / "coefficient_variation.csv.gz", "rt", newline="") as f:
        rows = list(csv.reader(f))
    data = [[float(x) if x != "" else np.nan for x in r[1:]] for r in rows[1:]]
    m = np.array(data, dtype=np.float64)[:, 1:]
    m.setflags(write=False)
    return m


@functools.lru_cache(maxsize=4)
def _worker_matrix(job: int) -> Tuple[np.ndarray, np.ndarray]:
    """(sample times, (S, W) normalised mini-batch times; NaN where missing) of job_{job}_norm."""
    with gzip.open(PAI_DATA_DIR / f"job_{job}_norm.csv.gz", "rt", newline="") as f:
        rows = list(csv.DictReader(f))
    t = np.array([int(r["time"]) for r in rows])
    w = np.array([int(r["worker"]) for r in rows])
    y = np.array([float(r["batch_time_norm"]) for r in rows])
    times, ti = np.unique(t, return_inverse=True)
    workers, wi = np.unique(w, return_inverse=True)
    a = np.full((len(times), len(workers)), np.nan)
    a[ti, wi] = y
    a.setflags(write=False)
    return times, a


def _cov_statistics(cov: np.ndarray) -> Dict[str, float]:
    """Statistics of a (jobs, iterations) CoV matrix (NaN = no iteration)."""
    v = cov[np.isfinite(cov)]
    above = v > STRAGGLER_COV_THRESHOLD
    valid = np.isfinite(cov)
    ever = np.any(np.where(valid, cov, 0.0) > STRAGGLER_COV_THRESHOLD, axis=1)
    w = cov[:, :PERSISTENCE_WINDOW]
    ever_w = np.any(np.where(np.isfinite(w), w, 0.0) > STRAGGLER_COV_THRESHOLD, axis=1)
    return {
        "median_cov": float(np.median(v)),
        "mean_cov": float(np.mean(v)),
        "frac_cov_above": float(np.mean(above)),
        "median_cov_when_above": float(np.median(v[above])) if above.any() else float("nan"),
        "median_cov_when_below": float(np.median(v[~above])),
        "frac_jobs_never_above": float(np.mean(~ever)),
        "frac_jobs_never_above_200": float(np.mean(~ever_w)),
    }


def _slow_fraction(times: np.ndarray) -> float:
    """Fraction of worker-iterations slower than SLOW_WORKER_THRESHOLD x the iteration median."""
    med = np.nanmedian(times, axis=1, keepdims=True)
    r = times / med
    ok = np.isfinite(r)
    return float(np.mean(r[ok] > SLOW_WORKER_THRESHOLD))


def _autocorr(d: np.ndarray, lag: int) -> float:
    a, b = d[:-lag].ravel(), d[lag:].ravel()
    ok = np.isfinite(a) & np.isfinite(b)
    return float(np.corrcoef(a[ok], b[ok])[0, 1])


@functools.lru_cache(maxsize=1)
def _targets() -> Dict[str, object]:
    cov = _cov_matrix()
    out: Dict[str, object] = dict(_cov_statistics(cov))
    out["window_lengths"] = tuple(int(n) for n in np.isfinite(cov).sum(axis=1))
    out["n_jobs"] = int(cov.shape[0])
    out["n_job_iterations"] = int(np.isfinite(cov).sum())

    per_job_slow = {}
    static, dynamic, tau = [], [], []
    for job in (1, 2, 3, 4):
        times, a = _worker_matrix(job)
        per_job_slow[job] = _slow_fraction(a)
        if job == 4:
            # Job 4's workers split into two groups 3-5x apart for the whole run (a placement
            # effect, not machine noise); it informs the straggler severity only (see docs).
            continue
        log = np.log(a)
        log = log - np.nanmean(log, axis=1, keepdims=True)    # remove the job-wide common mode
        worker_mean = np.nanmean(log, axis=0)
        static.append(float(np.std(worker_mean, ddof=1)))
        d = log - worker_mean
        dynamic.append(float(np.nanstd(d)))
        step = float(np.median(np.diff(times)))               # iterations between samples (10)
        r1, r10 = _autocorr(d, 1), _autocorr(d, 10)
        tau.append(9 * step / math.log(r1 / r10))             # exp fit between lags 1 and 10
    out["per_job_frac_slow"] = per_job_slow
    out["frac_worker_iters_slow"] = float(np.mean(list(per_job_slow.values())))
    out["static_std_log"] = float(np.sqrt(np.mean(np.square(static))))
    out["dynamic_std_log"] = float(np.sqrt(np.mean(np.square(dynamic))))
    out["correlation_time_iterations"] = float(np.exp(np.mean(np.log(tau))))
    out["static_variance_share"] = float(
        np.mean(np.square(static)) / (np.mean(np.square(static)) + np.mean(np.square(dynamic))))
    return out


def pai_targets() -> dict:
    """The PAI statistics the fluctuation defaults are calibrated to (see the module docstring).

    Keys: ``median_cov``, ``mean_cov``, ``frac_cov_above``, ``median_cov_when_above``,
    ``median_cov_when_below``, ``frac_jobs_never_above``, ``frac_jobs_never_above_200``,
    ``window_lengths`` (iterations recorded per job), ``n_jobs``, ``n_job_iterations``,
    ``per_job_frac_slow``, ``frac_worker_iters_slow``, ``static_std_log``, ``dynamic_std_log``,
    ``static_variance_share``, ``correlation_time_iterations``.  Computed once, then cached
    (a fresh dict is returned each call).
    """
    t = _targets()
    return {k: (dict(v) if isinstance(v, dict) else v) for k, v in t.items()}


def simulate_worker_statistics(params: FluctuationParams, n_workers: int = 10,
                               n_iterations: Optional[int] = None,
                               seconds_per_iteration: float = SECONDS_PER_ITERATION,
                               rng: Optional[np.random.Generator] = None, *,
                               n_jobs: int = 400,
                               window_lengths: Optional[Sequence[int]] = None) -> dict:
    """The statistics of :func:`pai_targets` on simulated jobs.

    ``n_jobs`` jobs of ``n_workers`` workers, each worker on its own machine (static factor from
    :func:`~cluster_env.world.fluctuation.draw_static_factors`, dynamic factor from one
    :class:`~cluster_env.world.fluctuation.FluctuationProcess` over all machines, started in its
    stationary law); mini-batch time = 1 / (static * dynamic), one iteration every
    ``seconds_per_iteration`` seconds.  Job ``i`` records ``window_lengths[i % len]`` iterations
    (default: the data's own window lengths, so ``frac_jobs_never_above`` is comparable); or all
    record ``n_iterations`` if that is given.  ``rng`` is required for reproducibility (default:
    a generator seeded with 0).

    Returns a dict with the CoV statistics (``median_cov``, ``mean_cov``, ``frac_cov_above``,
    ``median_cov_when_above``, ``median_cov_when_below``, ``frac_jobs_never_above``,
    ``frac_jobs_never_above_200``) and ``frac_worker_iters_slow``.
    """
    if rng is None:
        rng = np.random.default_rng(0)
    if n_workers < 2:
        raise ValueError("n_workers must be >= 2")
    if n_iterations is not None:
        lengths = np.full(n_jobs, int(n_iterations))
    else:
        wl = np.asarray(window_lengths if window_lengths is not None
                        else pai_targets()["window_lengths"], dtype=np.int64)
        lengths = wl[np.arange(n_jobs) % len(wl)]
    lengths = np.sort(lengths)[::-1]          # longest first: the recording jobs are a prefix
    horizon = int(lengths[0])
    m = n_jobs * n_workers
    static = draw_static_factors(m, params.static_sigma, rng)
    proc = FluctuationProcess(m, params, rng)
    cov = np.full((n_jobs, horizon), np.nan)
    slow = 0
    block = 128
    speeds = np.empty((block, m))
    for start in range(0, horizon, block):
        stop = min(horizon, start + block)
        for it in range(start, stop):
            speeds[it - start] = proc.advance(seconds_per_iteration)
        k = int(np.count_nonzero(lengths > start))                  # jobs still recording
        times = 1.0 / (speeds[:stop - start, :k * n_workers] * static[:k * n_workers])
        times = times.reshape(stop - start, k, n_workers)
        c = np.std(times, axis=2, ddof=1) / np.mean(times, axis=2)  # (iterations, jobs)
        med = np.median(times, axis=2, keepdims=True)
        slow_it = np.count_nonzero(times > SLOW_WORKER_THRESHOLD * med, axis=2)
        rec = np.arange(start, stop)[:, None] < lengths[None, :k]
        cov[:k, start:stop] = np.where(rec, c, np.nan).T
        slow += int(slow_it[rec].sum())
    total = int(lengths.sum()) * n_workers
    out = _cov_statistics(cov)
    out["frac_worker_iters_slow"] = slow / total
    return out
