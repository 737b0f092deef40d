"""Derive the shipped deadline figures (``cluster_env/data/chronus/``) from the Chronus artifact's
Philly job traces, byte for byte.

The raw traces are not in this repository: fetch the artifact (S-Lab-System-Group/ChronusArtifact,
the commit named in ``cluster_env/data/chronus/SOURCES.md``) and point ``--artifact`` at its root
(the CSVs under ``code/data/exp/``) or at a folder holding the three CSVs. The script checks each
raw file's sha256 against the one the figures were derived from before reading it.

    python benchmarks/derive_chronus_deadlines.py --artifact /path/to/ChronusArtifact          # rewrite
    python benchmarks/derive_chronus_deadlines.py --artifact /path/to/ChronusArtifact --check  # exit 1 if stale

The rule (the Chronus scheduler's reading of these files, ``code/main.py`` and
``code/alg/scheduler/time_aware_with_lease.py``):

* a row is a job; ``best_effort == 1`` (``job_type`` ``best``) marks a best-effort job, whose
  ``expect_time_list`` holds a placeholder (its submit time) and is not a deadline; every other job
  (``job_type`` ``strict``, or ``soft`` in MIX2) is an SLO job;
* an SLO job's deadline is ``submit_time + expect_time_list[0]``: the list's times are relative to
  submission, and its first entry is the full-value deadline (a ``soft`` job's later entries are
  later deadlines of lower value, ``expect_value_list`` 10-8-5-2; they are left out here);
* the deadline factor is ``k = expect_time_list[0] / duration`` (both in the trace's time unit,
  minutes: the scheduler's hour is 60 units).

Outputs (fixed-point text, so that a rerun writes the same bytes):

* ``deadline_factors.csv``: per trace, the empirical quantile function of ``k`` over its SLO jobs at
  percentiles 0, 1, ..., 100 (numpy's linear interpolation between order statistics);
* ``traces.csv``: per trace, the jobs, SLO/strict/soft/best-effort counts, the SLO share, and the
  Spearman rank correlation of ``k`` with duration, GPU count and submit time over the SLO jobs;
* ``k_by_duration.csv``: per trace and duration band (minutes; a band without jobs left out), the SLO
  jobs and their ``k``'s 10th, 50th and 90th percentiles (``k`` falls with duration in these traces).
"""
from __future__ import annotations

import argparse
import csv
import hashlib
import io
import sys
from pathlib import Path

import numpy as np
from scipy.stats import spearmanr

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "cluster_env" / "data" / "chronus"

#: The artifact's traces: name -> (path in the artifact, sha256 of the file the figures come from).
RAW = {
    "SLO": ("code/data/exp/trace_job_Philly_SLO.csv",
            "180fd7db3eeabe5df705c25259fcec972be2ba7b483887e26ca17e22d96b9f3e"),
    "MIX1": ("code/data/exp/trace_job_Philly_MIX1.csv",
             "6228d86e2c1fddb2d9e1c006f7a71b4127b7dbed4efbab5aea428fa72ea2dd74"),
    "MIX2": ("code/data/exp/trace_job_Philly_MIX2.csv",
             "4eb087e8f1a5d85ee27f8e8375f3912af643fbacb81d121d746950401426148f"),
}
PERCENTILES = tuple(range(101))
#: Duration bands of k_by_duration.csv, minutes: [lo, hi), the last open.
DURATION_BANDS = ((20, 30), (30, 60), (60, 120), (120, 300), (300, 1000), (1000, None))
COLUMNS = ("submit_time", "duration", "num_gpu", "expect_time_list", "best_effort", "job_type")


def find_raw(artifact: Path, name: str) -> Path:
    rel = RAW[name][0]
    for candidate in (artifact / rel, artifact / Path(rel).name):
        if candidate.is_file():
            return candidate
    raise SystemExit(f"derive_chronus_deadlines: {name}: neither {artifact / rel} nor "
                     f"{artifact / Path(rel).name} exists")


def read_trace(path: Path, sha256: str) -> dict[str, np.ndarray]:
    data = path.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    if digest != sha256:
        raise SystemExit(f"derive_chronus_deadlines: {path}: sha256 {digest}, expected {sha256} "
                         f"(not the file the shipped figures come from)")
    rows = list(csv.DictReader(io.StringIO(data.decode("utf-8"))))
    missing = [c for c in COLUMNS if rows and c not in rows[0]]
    if not rows or missing:
        raise SystemExit(f"derive_chronus_deadlines: {path}: no rows or missing columns {missing}")
    first = [int(r["expect_time_list"].split("-")[0]) for r in rows]
    return {"submit": np.array([int(r["submit_time"]) for r in rows], dtype=np.int64),
            "duration": np.array([int(r["duration"]) for r in rows], dtype=np.int64),
            "gpus": np.array([int(r["num_gpu"]) for r in rows], dtype=np.int64),
            "first_deadline": np.array(first, dtype=np.int64),
            "best_effort": np.array([int(r["best_effort"]) for r in rows], dtype=np.int64),
            "job_type": np.array([r["job_type"] for r in rows])}


def _csv(header: tuple[str, ...], rows: list[tuple]) -> bytes:
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(header)
    w.writerows(rows)
    return out.getvalue().encode("ascii")


def derive(traces: dict[str, dict[str, np.ndarray]]) -> dict[str, bytes]:
    """The shipped files' bytes: file name -> contents."""
    quantile_rows, trace_rows, band_rows = [], [], []
    for name, t in traces.items():
        slo = t["best_effort"] == 0
        if (t["duration"][slo] <= 0).any():
            raise SystemExit(f"derive_chronus_deadlines: {name}: an SLO job with duration <= 0")
        k = t["first_deadline"][slo] / t["duration"][slo]
        q = np.percentile(k, PERCENTILES)
        quantile_rows += [(name, p, f"{v:.6f}") for p, v in zip(PERCENTILES, q)]
        rho = [spearmanr(k, t[c][slo]).statistic for c in ("duration", "gpus", "submit")]
        kinds = {kind: int(((t["job_type"] == kind) & slo).sum()) for kind in ("strict", "soft")}
        trace_rows.append((name, RAW[name][0], len(slo), int(slo.sum()), kinds["strict"], kinds["soft"],
                           int((~slo).sum()), f"{slo.mean():.6f}", *(f"{r:.4f}" for r in rho)))
        d = t["duration"][slo]
        for lo, hi in DURATION_BANDS:
            band = (d >= lo) & (d < hi) if hi is not None else d >= lo
            if not band.any():
                continue
            p10, p50, p90 = np.percentile(k[band], (10, 50, 90))
            band_rows.append((name, lo, "" if hi is None else hi, int(band.sum()),
                              f"{p10:.4f}", f"{p50:.4f}", f"{p90:.4f}"))
    return {
        "deadline_factors.csv": _csv(("trace", "percentile", "k"), quantile_rows),
        "traces.csv": _csv(("trace", "path", "jobs", "slo_jobs", "strict_jobs", "soft_jobs", "best_effort_jobs",
                            "slo_share", "spearman_k_duration", "spearman_k_gpus", "spearman_k_submit"), trace_rows),
        "k_by_duration.csv": _csv(("trace", "duration_min_lo", "duration_min_hi", "slo_jobs", "k_p10", "k_p50",
                                   "k_p90"), band_rows),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--artifact", type=Path, required=True,
                        help="the ChronusArtifact checkout, or a folder holding the three trace_job_Philly_*.csv")
    parser.add_argument("--out", type=Path, default=OUT, help=f"where to write (default {OUT.relative_to(ROOT)})")
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if a file differs")
    args = parser.parse_args(argv)
    files = derive({name: read_trace(find_raw(args.artifact, name), sha) for name, (_, sha) in RAW.items()})
    stale = [n for n, data in files.items() if not (args.out / n).is_file() or (args.out / n).read_bytes() != data]
    if args.check:
        for n in stale:
            print(f"stale: {args.out / n}", file=sys.stderr)
        print("up to date" if not stale else f"{len(stale)} file(s) differ")
        return 1 if stale else 0
    args.out.mkdir(parents=True, exist_ok=True)
    for n, data in files.items():
        (args.out / n).write_bytes(data)
        print(f"{args.out / n}: {len(data)} bytes, sha256 {hashlib.sha256(data).hexdigest()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
