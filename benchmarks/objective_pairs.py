"""Paired tables on several metrics at once, from episodes already run: the "objective, average
JCT and fee side by side" tables of docs/objectives.md ("Learned agent").

``cluster-bench compare A B --metric M`` pairs two policies on one metric; its ``--out`` file (and
``cluster-bench run --out``'s ``results.json``) holds every metric of every episode. This script
reads such files (episodes of several files are merged: e.g. a run of the rules and a compare of
an agent with the strongest of them) and pairs them with :func:`baselines.harness.stats.paired_summary`
(the same 95% bootstrap interval of the geometric-mean ratio and win rate as ``compare``):

    # one policy against the reference, one row per metric
    python benchmarks/objective_pairs.py runs/agent-vs-quota.json --policy AGENT --reference quota \\
        --metrics tenant_max_slowdown,avg_jct,total_fee,quota_violation,preemptions
    # every policy of the files against the reference on one metric (which rule is strongest)
    python benchmarks/objective_pairs.py runs/tenants-rules/results.json --reference quota \\
        --metrics tenant_max_slowdown

``--json FILE`` also writes the summaries. The tables docs/objectives.md quotes for its trained
agents (:data:`DOC_RUNS`: the ``deadline_attainment`` agent on philly-slo-v1, the
``tenant_max_slowdown`` agent on philly-tenants-v1) come from :data:`DOC_FIGURES`
(``docs/objective_agents/figures.json``, keyed by scenario), which ``--measure [SCENARIO ...]``
recomputes from the trained weights checked in beside it (all runs: 500 episodes, about 10 minutes
on 2 busy cores) and ``--from-episodes`` builds from ``compare --out`` files of the same episodes;
tests/test_priority_objective.py checks that the page quotes that file (and, slow, that a fresh
measurement equals it).
"""
from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Sequence

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def load_episodes(paths: Sequence["str | Path"]) -> list[dict[str, Any]]:
    """The episode records of ``compare --out`` / ``run --out`` JSON files, merged (a record of the
    same policy and window in two files is kept once: the first file's)."""
    from baselines.harness.stats import window_key

    seen, records = set(), []
    for path in paths:
        try:
            doc = json.loads(Path(path).read_text())
        except (OSError, ValueError) as err:
            raise SystemExit(f"{path}: not a readable JSON file of episodes ({err})")
        if not isinstance(doc, dict) or not isinstance(doc.get("episodes"), list):
            raise SystemExit(f"{path}: no 'episodes' list (expected a cluster-bench compare/run --out file)")
        for record in doc["episodes"]:
            key = (record.get("policy"), window_key(record))
            if key not in seen:
                seen.add(key)
                records.append(record)
    return records


def summaries(records: Sequence[dict[str, Any]], reference: str, metrics: Sequence[str],
              policies: Optional[Sequence[str]] = None) -> list[dict[str, Any]]:
    """One row per (policy, metric): the paired summary of the policy against ``reference`` as a
    dict (policy, reference, metric, n, mean, reference_mean, geo_mean, ci_low, ci_high, wins,
    ties, units, undefined)."""
    from baselines.harness.stats import paired_summary

    names = list(policies) if policies else [p for p in dict.fromkeys(r["policy"] for r in records) if p != reference]
    rows = []
    for policy in names:
        for metric in metrics:
            s = paired_summary(records, policy, reference, metric)
            ties = sum(1 for r in s.ratios if r == 1.0)
            rows.append({"policy": policy, "reference": reference, "metric": metric, "n": s.n, "mean": s.mean,
                         "reference_mean": s.reference_mean, "geo_mean": s.geo_mean, "ci_low": s.ci_low,
                         "ci_high": s.ci_high, "wins": s.wins, "ties": ties, "units": s.units,
                         "undefined": s.undefined})
    return rows


def policy_means(records: Sequence[dict[str, Any]], metrics: Sequence[str]) -> dict[str, dict[str, float]]:
    """Each policy's plain mean of each metric over its episodes (None values left out): e.g. the
    share of JCT spent pending, ``avg_pending_time`` over ``avg_jct``, that says how much room
    an order has on a scenario."""
    from baselines.harness.files import number

    out: dict[str, dict[str, float]] = {}
    for policy in dict.fromkeys(r["policy"] for r in records):
        mine = [r for r in records if r["policy"] == policy]
        out[policy] = {m: float(np.nanmean([number(r.get(m)) for r in mine])) for m in metrics}
    return out


def _value(x: float) -> str:
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.4g}"


def markdown(rows: Sequence[dict[str, Any]]) -> str:
    """The rows as the Markdown table docs/objectives.md quotes."""
    lines = ["| policy | metric | policy (mean) | reference (mean) | ratio, geometric mean [95% interval] | policy better | ties |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| `{r['policy']}` | `{r['metric']}` | {_value(r['mean'])} | `{r['reference']}` "
                     f"{_value(r['reference_mean'])} | {r['geo_mean']:.4f} [{r['ci_low']:.4f}, {r['ci_high']:.4f}] "
                     f"| {r['wins']}/{r['units']} | {r['ties']} |")
    return "\n".join(lines)


@dataclass(frozen=True)
class DocRun:
    """A trained agent docs/objectives.md reports (none ships: see the page) and the paired tables it
    quotes: the scenario, split and windows, the policies run (the agent's label first), each
    table's policy, reference and metrics (the objective first, then the paper's two aims and the
    side metrics), and the metrics whose plain means per policy it quotes."""

    agent_file: Path
    label: str
    scenario: str
    rules: tuple[str, ...]
    tables: dict[str, dict[str, Any]]
    means: tuple[str, ...] = ()
    split: str = "test"
    seeds: tuple[int, int] = (0, 99)

    @property
    def setup(self) -> dict[str, Any]:
        """What figures.json records of the run's episodes."""
        return {"scenario": self.scenario, "split": self.split, "seeds": list(self.seeds),
                "policies": [self.label, *self.rules]}


AGENTS_DIR = ROOT / "docs" / "objective_agents"
DOC_FIGURES = AGENTS_DIR / "figures.json"
#: The runs of docs/objectives.md ("Learned agent"), by scenario (figures.json's keys).
DOC_RUNS = {
    "philly-slo-v1": DocRun(
        agent_file=AGENTS_DIR / "philly-slo-v1.deadline_attainment.priority.json",
        label="es-slo-attainment", scenario="philly-slo-v1", rules=("las-migrate",),
        tables={"agent-vs-las-migrate": {
            "policy": "es-slo-attainment", "reference": "las-migrate",
            "metrics": ["deadline_attainment", "avg_jct", "total_fee", "hp_avg_jct", "be_avg_jct", "preemptions"]}}),
    "philly-tenants-v1": DocRun(
        agent_file=AGENTS_DIR / "philly-tenants-v1.tenant_max_slowdown.priority.json",
        label="es-tenant-slowdown", scenario="philly-tenants-v1", rules=("quota", "las-migrate"),
        tables={
            "strongest-rule": {"policy": "quota", "reference": "las-migrate",
                               "metrics": ["tenant_max_slowdown", "ftf_max_rho", "quota_violation", "avg_jct",
                                           "total_fee"]},
            "agent-vs-rule": {"policy": "es-tenant-slowdown", "reference": "quota",
                              "metrics": ["tenant_max_slowdown", "avg_jct", "total_fee", "quota_violation",
                                          "preemptions"]},
            "agent-vs-las-migrate": {"policy": "es-tenant-slowdown", "reference": "las-migrate",
                                     "metrics": ["tenant_max_slowdown", "avg_jct", "total_fee"]},
        },
        # how much of a job's time is spent pending (the room an order has)
        means=("avg_jct", "avg_pending_time", "gpu_utilization")),
}


def doc_figures(run: DocRun, records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The tables and means of ``run`` from ``records`` (the agent labelled ``run.label``)."""
    tables = {name: summaries(records, t["reference"], t["metrics"], [t["policy"]]) for name, t in run.tables.items()}
    return {"setup": run.setup, "tables": tables, "means": policy_means(records, list(run.means))}


def measure_doc_records(run: DocRun, workers: Optional[int] = None) -> list[dict[str, Any]]:
    """The episodes of ``run``: its agent (from ``run.agent_file``) and its rules on its windows."""
    from baselines.harness.sweep import make_tasks, run_tasks
    from dual_agent.priority import load_priority_agent

    lo, hi = run.seeds
    agent = load_priority_agent(run.agent_file, run.scenario)
    tasks = make_tasks([agent, *run.rules], [run.scenario], run.split, range(lo, hi + 1),
                       labels=run.setup["policies"])
    return [r.record for r in run_tasks(tasks, workers=workers)]


def scenario_of(records: Sequence[dict[str, Any]]) -> str:
    """The one scenario of :data:`DOC_RUNS` that ``records`` were run on (a clear error otherwise)."""
    scenarios = sorted({str(r.get("scenario")) for r in records})
    if len(scenarios) != 1 or scenarios[0] not in DOC_RUNS:
        raise SystemExit(f"the episodes are of scenario(s) {scenarios}; expected exactly one of {sorted(DOC_RUNS)}")
    return scenarios[0]


def relabel(records: Sequence[dict[str, Any]], old: str, new: str) -> list[dict[str, Any]]:
    """``records`` with policy ``old`` renamed ``new`` (a compare file names the agent by its path)."""
    return [dict(r, policy=new) if r["policy"] == old else r for r in records]


def write_doc_figures(measured: dict[str, dict[str, Any]]) -> None:
    """Replace these runs' entries of :data:`DOC_FIGURES` (keyed by scenario), keeping the others."""
    from baselines.harness.files import atomic_write, json_text

    figures = json.loads(DOC_FIGURES.read_text()) if DOC_FIGURES.exists() else {}
    figures.update(measured)
    ordered = {name: figures[name] for name in sorted(figures)}
    atomic_write(DOC_FIGURES, lambda f: f.write(json_text(ordered) + "\n"))


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="*", help="cluster-bench compare/run --out JSON files")
    parser.add_argument("--reference", help="the policy every ratio is taken against")
    parser.add_argument("--policy", action="append", help="policy to pair (repeatable; default: all but the reference)")
    parser.add_argument("--metrics", default="avg_jct", help="comma-separated metrics (default avg_jct)")
    parser.add_argument("--means", default="", help="also print each policy's plain mean of these comma-separated metrics")
    parser.add_argument("--json", help="also write the rows (and the means) to this JSON file")
    parser.add_argument("--measure", nargs="*", metavar="SCENARIO", choices=sorted(DOC_RUNS),
                        help=f"rerun the episodes of {DOC_FIGURES.name} (its runs on these scenarios; none named: "
                             "all) and write them into it")
    parser.add_argument("--from-episodes", metavar="AGENT_POLICY",
                        help=f"write the run of FILES' scenario into {DOC_FIGURES.name}, their policy AGENT_POLICY "
                             "being the agent")
    parser.add_argument("--workers", type=int, help="with --measure: parallel workers (default: cores)")
    args = parser.parse_args(argv)
    if args.measure is not None or args.from_episodes:
        if args.from_episodes:
            records = load_episodes(args.files)
            run = DOC_RUNS[scenario_of(records)]
            measured = {run.scenario: doc_figures(run, relabel(records, args.from_episodes, run.label))}
        else:
            names = args.measure or list(DOC_RUNS)
            measured = {name: doc_figures(DOC_RUNS[name], measure_doc_records(DOC_RUNS[name], args.workers))
                        for name in names}
        write_doc_figures(measured)
        for scenario, figures in measured.items():
            for name, rows in figures["tables"].items():
                print(f"{scenario} {name}:\n{markdown(rows)}\n")
        print(f"wrote {DOC_FIGURES}")
        return 0
    if not args.files or not args.reference:
        parser.error("give episode FILES and --reference (or --measure / --from-episodes)")
    records = load_episodes(args.files)
    rows = summaries(records, args.reference, [m for m in args.metrics.split(",") if m], args.policy)
    print(markdown(rows))
    means = policy_means(records, [m for m in args.means.split(",") if m])
    for policy, values in means.items():
        if values:
            print(f"{policy}: " + ", ".join(f"{m} {_value(v)}" for m, v in values.items()))
    if args.json:
        from baselines.harness.files import atomic_write, json_text

        atomic_write(Path(args.json), lambda f: f.write(json_text({"rows": rows, "means": means})))
    return 0


if __name__ == "__main__":
    sys.exit(main())
