"""What ``cluster-bench`` commands write, and what a stopped command keeps.

A command's complete set of files (``run``: results, summary and plots; ``sweep``: the
``load_sweep`` files; ``compare --out``: its file) is replaced only by a new complete set. A command
stopped by Ctrl-C, by lost workers or by an episode's own error writes the episodes that finished to
its ``*.partial.*`` files instead, beside the previous complete set, which stays as it was.
"""
from __future__ import annotations

import hashlib
import re
import sys
from pathlib import Path
from typing import Callable, Optional, Sequence

#: Files ``run`` writes into its folder (besides timeline_<policy>.png, and paired_<metric>.png with
#: ``--metric``: :func:`paired_file`), checked before episodes run; objectives.png where the scenario
#: has service objectives, gap_best_known.png where the shipped optimality table has the run's windows.
RUN_FILES = ("results.csv", "summary.csv", "results.json", "jct_cdf.png", "paired_avg_jct.png", "utilization.png",
             "objectives.png", "gap_best_known.png")
#: Where ``run`` writes the episodes that finished when it is stopped (Ctrl-C, a failed episode):
#: beside the complete set of a previous run, which stays as it was.
RUN_PARTIAL_FILES = ("results.partial.csv", "results.partial.json")


#: The characters a file name made from a label keeps (others become ``_``): safe in every shell and
#: on every file system, no quoting needed.
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def slug(label: str) -> str:
    """``label`` as a safe file-name part: ``MaskablePPO(ppo_model)`` -> ``MaskablePPO_ppo_model``,
    ``tiresias+fastest`` -> ``tiresias_fastest`` (letters, digits, ``.``, ``_`` and ``-`` only, no
    leading dot or dash)."""
    return _UNSAFE.sub("_", label).strip("_").lstrip(".-") or "policy"


def timeline_file(label: str) -> str:
    """The name of a policy's timeline plot in ``run``'s folder (see :func:`timeline_files`)."""
    return f"timeline_{slug(label)}.png"


def timeline_files(labels: Sequence[str]) -> dict[str, str]:
    """The timeline file of each of a run's ``labels``: :func:`timeline_file`, and where two labels
    make one slug (``a+b`` and ``a/b``) the later ones with a short digest of the label, so no
    plot overwrites another."""
    out: dict[str, str] = {}
    taken: set[str] = set()
    for label in labels:
        name = timeline_file(label)
        if name in taken:
            name = f"timeline_{slug(label)}-{hashlib.sha1(label.encode()).hexdigest()[:8]}.png"
        taken.add(name)
        out[label] = name
    return out


def paired_file(metric: str) -> str:
    """The name of ``run``'s paired plot on ``metric``: ``paired_avg_jct.png`` by default,
    ``paired_deadline_attainment.png`` with ``--metric deadline_attainment``."""
    return f"paired_{slug(metric)}.png"


def previous_run_files(out: Path) -> list[Path]:
    """The files of a ``run`` set in ``out`` (complete or partial): what a new complete set replaces."""
    return [out / n for n in RUN_FILES + RUN_PARTIAL_FILES] + sorted(
        f for f in out.glob("paired_*.png") if f.name not in RUN_FILES) + sorted(out.glob("timeline_*.png"))


def write_partial(where: Optional[Path], write: Callable[[list], None], stop: BaseException, total: int,
                  prog: str) -> int:
    """After a stopped run (``stop``: Ctrl-C, lost workers, or an episode's own error, carrying the
    results so far), write the episodes that finished (``write(finished_results)``, whose files
    appear together; ``where`` is the main one, None: nothing is written) and say so in one line;
    the exit code: 130 for Ctrl-C, else 1."""
    from baselines.harness.files import written_together
    from baselines.harness.sweep import RunInterrupted, describe_task, episode_failure, stopped_results

    failed = episode_failure(stop)
    finished = [r for r in stopped_results(stop) or [] if r is not None]
    with written_together("the episodes that finished"):    # a second Ctrl-C waits for them
        write(finished)
    if isinstance(stop, RunInterrupted):
        why = "interrupted"
    elif failed:
        why = f"the episode of {describe_task(failed[1])} failed: {type(stop).__name__}: {stop}"
    else:
        why = str(stop)
    kept = (f"wrote the {len(finished)} of {total} episodes that finished to {where}" if where is not None else
            f"{len(finished)} of {total} episodes had finished (not written: give --out to keep them)")
    print(f"\n{prog}: {' '.join(why.split())}; {kept}", file=sys.stderr)
    return 130 if isinstance(stop, RunInterrupted) else 1


def interrupted_while_writing(deferred: list, prog: str, where: "str | Path") -> int:
    """After a complete set of files was written: 130 with one line when Ctrl-C came while they
    were being written (held off until they were complete), else 0. An interrupt never exits 0."""
    if not deferred:
        return 0
    print(f"\n{prog}: interrupted while writing; the files in {where} were completed first", file=sys.stderr)
    return 130


def partial_file(out: "str | Path") -> Path:
    """Where ``compare --out FILE.json`` writes the episodes of a stopped comparison: FILE.partial.json."""
    out = Path(out)
    return out.with_name(f"{out.stem}.partial{out.suffix or '.json'}")


#: Files ``sweep`` writes into its folder, checked before episodes run.
SWEEP_FILES = ("load_sweep.csv", "load_sweep.json", "load_sweep.png")
#: Where a stopped ``sweep`` writes the episodes that finished (the previous complete sweep stays).
SWEEP_PARTIAL_FILES = ("load_sweep.partial.csv", "load_sweep.partial.json")
