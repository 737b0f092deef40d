"""Regression scores: checked-in test-split metrics of policies, recomputed and compared.

A scores file (JSON) holds, for each scenario, each policy and each seed, every metric of one
deterministic episode::

    {"format": 1, "split": "test", "seeds": [0, 1, 2],
     "env_kwargs": {}, "rel_tol": 1e-06, "abs_tol": 1e-06,
     "scores": {"philly-v0": {"fifo": {"0": {"avg_jct": ..., ...}, ...}, ...}}}

``check_scores`` reruns every entry and lists what moved beyond the tolerance; ``update_scores``
rewrites a file on purpose. The package keeps one file per scenario under ``baselines/scores``;
researchers can keep their own file for their own policies (``cluster-bench scores --file``).
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Sequence

from cluster_env.core.metrics import METRIC_KEYS
from cluster_env.core.objectives import OBJECTIVE_KEYS

from baselines.harness.files import atomic_write, json_text, number
from baselines.harness.sweep import make_tasks, run_tasks

SCORES_DIR = Path(__file__).resolve().parent.parent / "scores"
FORMAT = 1
DEFAULT_REL_TOL = 1e-6
DEFAULT_ABS_TOL = 1e-6


def packaged_scores_file(scenario: str) -> Path:
    """The checked-in scores file of a scenario."""
    return SCORES_DIR / f"{scenario}.json"


def packaged_scenarios() -> list[str]:
    """Scenarios that have checked-in scores."""
    return sorted(p.stem for p in SCORES_DIR.glob("*.json"))


@dataclass
class Drift:
    """One metric that moved beyond the tolerance (or an entry that could not be compared)."""

    scenario: str
    policy: str
    seed: int
    metric: str
    expected: float
    got: float

    @property
    def relative(self) -> float:
        if self.expected == 0 or math.isnan(self.expected) or math.isnan(self.got):
            return math.inf
        return abs(self.got - self.expected) / abs(self.expected)


def load_scores(path: "str | Path") -> dict[str, Any]:
    """Read and validate a scores file; errors name the file and what is wrong."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: no such scores file (create it with `cluster-bench scores --update`)") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not valid JSON (line {exc.lineno}, column {exc.colno}): {exc.msg}") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ValueError(f"{path}: not a scores file of format {FORMAT} (field 'format')")
    for key in ("split", "seeds", "scores"):
        if key not in data:
            raise ValueError(f"{path}: missing field {key!r}")
    return data


def compute_scores(scenarios: Sequence[str], policies: Sequence[str], seeds: Sequence[int], split: str = "test",
                   env_kwargs: Optional[dict] = None, backend: str = "auto", workers: Optional[int] = None,
                   progress: bool = False) -> dict[str, dict[str, dict[str, dict[str, float]]]]:
    """Run every (scenario, policy, seed) and return ``scores[scenario][policy][seed][metric]``."""
    tasks = make_tasks(list(policies), list(scenarios), split, list(seeds), env_kwargs)
    results = run_tasks(tasks, backend=backend, workers=workers, progress=progress)
    scores: dict[str, dict[str, dict[str, dict[str, float]]]] = {}
    for task, result in zip(tasks, results):
        policy = task.policy if isinstance(task.policy, str) else result.record["policy"]
        entry = {k: float(result.record[k]) for k in (*METRIC_KEYS, *OBJECTIVE_KEYS) if k in result.record}
        scores.setdefault(task.scenario, {}).setdefault(policy, {})[str(task.seed)] = entry
    return scores


def update_scores(path: "str | Path", scenarios: Sequence[str], policies: Sequence[str], seeds: Sequence[int],
                  split: str = "test", env_kwargs: Optional[dict] = None, backend: str = "auto",
                  workers: Optional[int] = None, progress: bool = False) -> Path:
    """Recompute and write a scores file (replacing the given scenarios' entries)."""
    path = Path(path)
    scores = compute_scores(scenarios, policies, seeds, split, env_kwargs, backend, workers, progress)
    payload = {"format": FORMAT, "split": split, "seeds": [int(s) for s in seeds],
               "env_kwargs": dict(env_kwargs or {}), "rel_tol": DEFAULT_REL_TOL, "abs_tol": DEFAULT_ABS_TOL,
               "scores": scores}
    text = json_text(payload, indent=1, sort_keys=True) + "\n"      # standard JSON: an undefined metric is null
    return atomic_write(path, lambda f: f.write(text))


@dataclass
class CheckResult:
    """The check of one scores file: what moved, and how many stored values were compared."""

    path: Path
    drifts: list[Drift]
    values: int


def check_scores(path: "str | Path", scenarios: Optional[Sequence[str]] = None, backend: str = "auto",
                 workers: Optional[int] = None, progress: bool = False) -> list[Drift]:
    """Recompute every entry of a scores file; return the metrics that moved beyond its tolerance."""
    return check_score_files([(path, scenarios)], backend, workers, progress)[0].drifts


def check_score_files(targets: Sequence[tuple["str | Path", Optional[Sequence[str]]]], backend: str = "auto",
                      workers: Optional[int] = None, progress: bool = False) -> list[CheckResult]:
    """Check several scores files at once: every (file, scenario, policy, seed) episode goes into
    one batch of tasks on ``backend`` (so a process pool keeps every core busy across files), then
    each file's stored metrics are compared with the recomputed ones. Only the metrics a file
    holds are compared (a file written before a metric existed stays valid)."""
    loaded = []
    tasks, owners = [], []
    for path, scenarios in targets:
        data = load_scores(path)
        stored = data["scores"]
        wanted = list(stored) if scenarios is None else [s for s in scenarios if s in stored]
        seeds = [int(s) for s in data["seeds"]]
        loaded.append((Path(path), data, wanted, seeds))
        for scenario in wanted:
            batch = make_tasks(sorted(stored[scenario]), [scenario], data["split"], seeds, data.get("env_kwargs"))
            tasks += batch
            owners += [len(loaded) - 1] * len(batch)
    results = run_tasks(tasks, backend=backend, workers=workers, progress=progress)
    got: list[dict] = [{} for _ in loaded]
    for owner, task, result in zip(owners, tasks, results):
        policy = task.policy if isinstance(task.policy, str) else result.record["policy"]
        got[owner].setdefault(task.scenario, {}).setdefault(policy, {})[str(task.seed)] = result.record
    checks = []
    for i, (path, data, wanted, seeds) in enumerate(loaded):
        drifts, values = _compare(data, wanted, seeds, got[i])
        checks.append(CheckResult(path, drifts, values))
    return checks


def missing_extra_reason(path: "str | Path", scenarios: Optional[Sequence[str]] = None) -> Optional[str]:
    """Why the scores file ``path`` cannot be checked in this install, None when it can: the
    one-line error of its first policy that needs an extra that is not installed (the base
    install has no torch, so the files holding the torch agent's scores cannot be checked there).
    Baseline names need no extra and are not resolved."""
    from baselines.harness.sweep import resolve_policy
    from baselines.registry import canonical_name
    from cluster_env.extras import MissingExtraError

    stored = load_scores(path)["scores"]
    for scenario in (list(stored) if scenarios is None else [s for s in scenarios if s in stored]):
        for policy in sorted(stored[scenario]):
            if canonical_name(policy) is not None:
                continue
            try:
                resolve_policy(policy, scenario)
            except MissingExtraError as exc:
                return f"{policy!r} on {scenario}: {exc}"
    return None


def _compare(data: dict, scenarios: Sequence[str], seeds: Sequence[int], got: dict) -> tuple[list[Drift], int]:
    rel_tol = float(data.get("rel_tol", DEFAULT_REL_TOL))
    abs_tol = float(data.get("abs_tol", DEFAULT_ABS_TOL))
    stored = data["scores"]
    drifts: list[Drift] = []
    values = 0
    for scenario in scenarios:
        for policy in sorted(stored[scenario]):
            for seed in seeds:
                expected = stored[scenario][policy].get(str(seed))
                if expected is None:
                    drifts.append(Drift(scenario, policy, seed, "<missing entry>", math.nan, math.nan))
                    continue
                record = got[scenario][policy][str(seed)]
                for metric, stored_value in expected.items():
                    values += 1
                    value = number(stored_value)
                    new = float(record.get(metric, math.nan))
                    same = (math.isnan(value) and math.isnan(new)) or math.isclose(
                        new, value, rel_tol=rel_tol, abs_tol=abs_tol)
                    if not same:
                        drifts.append(Drift(scenario, policy, seed, metric, value, new))
    return drifts, values


def update_command(path: "str | Path", scenarios: Sequence[str], policies: Sequence[str], seeds: Sequence[int],
                   packaged: bool) -> str:
    """The ``cluster-bench scores --update`` command that rewrites ``path`` with the same entries."""
    seed_text = ",".join(str(s) for s in seeds)
    if len(seeds) > 1 and list(seeds) == list(range(seeds[0], seeds[-1] + 1)):
        seed_text = f"{seeds[0]}-{seeds[-1]}"
    cmd = "cluster-bench scores --update"
    if not packaged:
        cmd += f" --file {path}"
    return cmd + f" --scenarios {','.join(scenarios)} --policies {','.join(policies)} --seeds {seed_text}"


def file_update_command(path: "str | Path", packaged: bool) -> str:
    """:func:`update_command` for everything a scores file holds."""
    data = load_scores(path)
    scenarios = sorted(data["scores"])
    policies = sorted({p for sc in scenarios for p in data["scores"][sc]})
    cmd = update_command(path, scenarios, policies, [int(s) for s in data["seeds"]], packaged)
    if data.get("env_kwargs"):      # the CLI has no --env for scores: say how to keep them
        cmd += (f"   (the file's env_kwargs {data['env_kwargs']!r} need "
                "baselines.harness.scores.update_scores(..., env_kwargs=...))")
    if data.get("split", "test") != "test":
        cmd += f"   (the file's split {data['split']!r} needs update_scores(..., split=...))"
    return cmd


def format_drifts(drifts: Sequence[Drift]) -> str:
    """A table of what moved."""
    header = f"{'scenario':<14} {'policy':<22} {'seed':>4}  {'metric':<16} {'expected':>16} {'got':>16} {'rel. diff':>10}"
    lines = [header, "-" * len(header)]
    for d in drifts:
        lines.append(f"{d.scenario:<14} {d.policy:<22} {d.seed:>4}  {d.metric:<16} {d.expected:>16.6g} "
                     f"{d.got:>16.6g} {d.relative:>10.2e}")
    return "\n".join(lines)
