"""The numbers and defaults that README.md and docs/ quote, generated from the code and from measured
figures, so that the docs cannot drift from what the package does.

A generated part of a page sits between two HTML comments (invisible on GitHub)::

    <!-- generated: NAME -->...<!-- end: NAME -->

and this script rewrites it from its source: the CLI parser's defaults, the scenario registry, the
shipped agents, the checked-in score files, or ``docs/figures.json`` (figures measured by
``--measure``: the README's headline comparison over 100 test windows and the load sweep of
docs/baselines.md). ``tests/test_docs_current.py`` fails when a page differs from this script's
output, or when ``docs/figures.json`` differs from a fresh measurement (a slow test).

    python benchmarks/docs_current.py --check      # exit 1 and name every stale part
    python benchmarks/docs_current.py --write      # rewrite the generated parts
    python benchmarks/docs_current.py --measure    # rerun the measured figures into docs/figures.json (~1 min)
    python benchmarks/docs_current.py --images     # redraw docs/img/*.png with today's plots
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any, Callable, Optional

ROOT = Path(__file__).resolve().parent.parent
FIGURES = ROOT / "docs" / "figures.json"
MARKER = re.compile(r"(<!-- generated: (?P<name>[\w-]+) -->)(?P<body>.*?)(<!-- end: (?P=name) -->)", re.S)

#: The README's headline: the shipped agent against the strongest rule on its scenario (docs/design.md section 9:
#: paired, 100 test windows, 95% bootstrap interval, win rate).
HEADLINE = {"agent": "dual", "reference": "las-migrate", "scenario": "philly-hetero-v2", "split": "test",
            "seeds": "0-99", "metric": "avg_jct"}
#: The load sweep of docs/baselines.md ("Load sweeps").
LOAD_SWEEP = {"scenario": "philly-v1", "split": "test", "loads": [0.5, 1, 1.5, 2, 3],
              "policies": ["fifo", "sjf", "tiresias", "tiresias+fastest"], "seeds": "0-9", "reference": "fifo"}


# ----------------------------------------------------------------------------- sources
def cli_parser() -> argparse.ArgumentParser:
    from baselines.cli import build_parser

    return build_parser()


def subparser(name: str) -> argparse.ArgumentParser:
    """The ``cluster-bench NAME`` parser (plugin commands included)."""
    parser = cli_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices[name]


def seeds_text(seeds: Any) -> str:
    """``[0, 1, ..., 19]`` -> ``"0-19"`` (a contiguous list), else the list joined by commas."""
    seeds = list(seeds)
    if len(seeds) > 1 and seeds == list(range(seeds[0], seeds[-1] + 1)):
        return f"{seeds[0]}-{seeds[-1]}"
    return ",".join(map(str, seeds))


def option_default(command: str, option: str) -> Any:
    """The default of ``cluster-bench COMMAND OPTION`` as the parser holds it."""
    for action in subparser(command)._actions:
        if option in action.option_strings:
            return action.default
    raise KeyError(f"cluster-bench {command} has no option {option}")


def _usage_item(action: argparse.Action) -> str:
    """``[--seeds 0-19]``: an option with its default (or its metavar where it has none)."""
    flag = action.option_strings[-1] if action.option_strings else action.dest.upper()
    if not action.option_strings:
        return flag
    if action.nargs == 0:
        return f"[{flag}]"
    if action.choices:
        value = "|".join(map(str, action.choices))
    elif action.default not in (None, [], "") and not isinstance(action.default, bool):
        value = seeds_text(action.default) if isinstance(action.default, list) else str(action.default)
    else:
        value = action.metavar or action.dest.upper()
    if action.default not in (None, [], "") and action.choices:
        value = f"{value} (default {action.default})"
    text = f"{flag} {value}"
    if action.dest == "env":
        text += " ..."
    return text if action.required else f"[{text}]"


def cli_usage(commands: tuple[str, ...] = ("run", "compare", "sweep", "scenarios", "policies", "replay",
                                           "scores")) -> str:
    """Each command's options with their defaults (the parser's, so they cannot go stale)."""
    lines = []
    for name in commands:
        items = [_usage_item(a) for a in subparser(name)._actions
                 if not isinstance(a, argparse._HelpAction) and a.dest not in ("quiet",)]
        line, out = f"cluster-bench {name}", []
        for item in items:
            if len(line) + 1 + len(item) > 100:
                out.append(line)
                line = " " * 18 + item
            else:
                line += " " + item
        out.append(line)
        lines += out
    return "```\n" + "\n".join(lines) + "\n```"


def scenario_table() -> str:
    """One row per registered scenario: its cluster, episodes, default load and data."""
    import cluster_env

    rows = ["| name | cluster | episodes | description |", "|---|---|---|---|"]
    for name in cluster_env.list_scenarios():
        s = cluster_env.get_scenario(name)
        c = s.cluster()
        mix = ", ".join(f"{n} {k}" for k, n in c.gpus_of_type().items())
        episode = f"windows of {s.jobs_per_episode:,} jobs" if s.jobs_per_episode else "each split one episode"
        if s.repeat > 1:
            episode += f" tiled {s.repeat} times"
        if s.load is not None:
            episode += f", offered load {s.load:g}"
        elif s.time_scale != 1.0:
            episode += f", arrivals compressed {1 / s.time_scale:g}x"
        else:
            episode += ", the trace's own arrival times"
        shown = f"`{name}`" if name.endswith("-v0") else f"**`{name}`**"
        rows.append(f"| {shown} | {c.num_machines:,} machines, {c.total_gpus:,} GPUs ({mix}) | {episode} | "
                    f"{s.description} |")
    return "\n".join(rows)


def queueing_card() -> str:
    """Per scenario with checked-in scores: its yardstick's waiting share (mean over the checked-in
    windows of its average pending time over its average JCT) and GPU utilisation, from
    ``baselines/scores/<scenario>.json``."""
    import cluster_env
    from baselines.harness.scores import load_scores, packaged_scenarios, packaged_scores_file
    from baselines.yardstick import yardstick

    rows = ["| scenario | default load | yardstick | waiting share | GPU utilisation | windows |",
            "|---|---|---|---:|---:|---|"]
    for name in packaged_scenarios():
        data = load_scores(packaged_scores_file(name))
        rule = yardstick(name)
        runs = list(data["scores"][name][rule].values())
        busy = sum(r["gpu_utilization"] for r in runs) / len(runs)
        waiting = "not recorded"        # score files older than the pending-time metric
        if all("avg_pending_time" in r for r in runs):
            waiting = f"{sum(r['avg_pending_time'] / r['avg_jct'] for r in runs) / len(runs):.0%}"
        s = cluster_env.get_scenario(name)
        load = "trace times" if s.load is None else f"{s.load:g} ({s.load_measure})"
        rows.append(f"| `{name}` | {load} | `{rule}` | {waiting} | {busy:.0%} | "
                    f"{data['split']} {seeds_text(data['seeds'])} |")
    return "\n".join(rows)


def shipped_agents() -> dict[str, list[str]]:
    """The scenarios that ship an agent, by family: ``{"paper": [...], "priority": [...]}``."""
    pretrained = ROOT / "dual_agent" / "pretrained"
    return {"paper": sorted(p.stem for p in pretrained.glob("*.pt")),
            "priority": sorted(p.name[:-len(".priority.json")] for p in pretrained.glob("*.priority.json"))}


def _names(items: list[str]) -> str:
    quoted = [f"`{x}`" for x in items]
    return quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " and " + quoted[-1]


def headline(figures: dict) -> str:
    """The README's sentence on the shipped agents and the headline comparison."""
    h = figures["headline"]
    agents = shipped_agents()
    return (f"pretrained checkpoints for {_names(agents['paper'])} that `cluster-bench run` scores next to the "
            "baselines; and its ordering agent in *priority mode* (a learned index on least-attained "
            "service, numpy, trained with evolution strategies in the compiled engine, with an optional "
            f"learned residual placer), shipped for {_names(agents['priority'])}. On `{h['scenario']}` "
            f"`{h['agent']}` is {h['geo_mean']:.3f} [{h['ci_low']:.3f}, {h['ci_high']:.3f}] of `{h['reference']}`'s "
            f"average JCT, the strongest rule there, over {h['split']} windows {h['seeds']} (paired, 95% bootstrap "
            f"interval; better on {h['wins']} of {h['windows']} windows)")


def scores_check_line() -> str:
    """What ``cluster-bench scores --check`` prints at the end when nothing moved (wall time aside)."""
    from baselines.harness.scores import load_scores, packaged_scenarios, packaged_scores_file

    files = packaged_scenarios()
    values, tols = 0, set()
    for scenario in files:
        data = load_scores(packaged_scores_file(scenario))
        tols.add(float(data.get("rel_tol", 1e-6)))
        for policies in data["scores"].values():
            for per_seed in policies.values():
                values += sum(len(per_seed[str(seed)]) for seed in data["seeds"] if str(seed) in per_seed)
    tol = f"{tols.pop():g}" if len(tols) == 1 else "each file's tolerance"
    return f"```\nscores check: {len(files)} file(s), {values} values, all within {tol} (<wall time> s)\n```"


def score_files_count() -> str:
    from baselines.harness.scores import packaged_scenarios

    return str(len(packaged_scenarios()))


def python_defaults() -> dict[str, str]:
    """The default scenario of each Python constructor a user calls without one (their signatures'
    defaults, and the registered Gymnasium ids')."""
    import inspect

    import gymnasium

    import cluster_env
    from baselines import evaluate
    from cluster_env.vector import vector_env
    from cluster_env.wrappers import make_vec_env

    out = {}
    for label, fn in (("cluster_env.parallel_env()", cluster_env.parallel_env), ("cluster_env.env()", cluster_env.env),
                      ("cluster_env.vector.vector_env()", vector_env), ("make_vec_env()", make_vec_env),
                      ("baselines.evaluate()", evaluate)):
        out[label] = inspect.signature(fn).parameters["scenario"].default
    for env_id in ("cluster_env/HeteroClusterFlat-v1", "cluster_env/HeteroClusterFlat-v0"):
        out[f'gymnasium.make("{env_id}")'] = gymnasium.spec(env_id).kwargs["scenario"]
    return out


def scenario_defaults() -> str:
    """Which scenario each example and command starts from when none is given."""
    import cluster_env

    by_default: dict[str, list[str]] = {}
    for path in sorted((ROOT / "examples").glob("[0-9][0-9]_*.py")):
        text = path.read_text()
        found = re.search(r'add_argument\("--(?:base-)?scenario", default=([^,)]+)', text)
        if not found:
            continue
        value = found.group(1).strip()
        default = cluster_env.DEFAULT_SCENARIO if value == "DEFAULT_SCENARIO" else value.strip("\"'")
        by_default.setdefault(default, []).append(path.name[:2])
    for label, default in python_defaults().items():
        by_default.setdefault(default, []).append(f"`{label}`")
    commands = {"run": "--scenario", "compare": "--scenario", "replay": "--scenario", "train": "--scenario",
                "train-priority": "--scenario"}
    for command, option in commands.items():
        try:
            default = option_default(command, option)
        except KeyError:                             # a plugin command that is not installed
            continue
        if default is None and command == "train-priority":
            from dual_agent.priority.cli import DEFAULT_SCENARIO as default   # resolved when the run starts
        by_default.setdefault(default, []).append(f"`cluster-bench {command}`")
    parts = []
    for scenario, users in sorted(by_default.items(), key=lambda kv: kv[0] != cluster_env.DEFAULT_SCENARIO):
        examples = [u for u in users if not u.startswith("`")]
        cmds = [u for u in users if u.startswith("`")]
        who = ([f"examples {', '.join(examples)}" if len(examples) > 1 else f"example {examples[0]}"] if examples
               else []) + cmds
        parts.append(f"`{scenario}`: {', '.join(who)}")
    return "; ".join(parts)


def default_yardstick() -> str:
    """The default scenario's yardstick, named as the docs quote it: ``las-migrate``."""
    from baselines.yardstick import yardstick
    from cluster_env.scenarios.registry import DEFAULT_SCENARIO

    return f"`{yardstick(DEFAULT_SCENARIO)}`"


def default_yardstick_on() -> str:
    """``las-migrate` on philly-v1`` (the tutorial's phrase)."""
    from cluster_env.scenarios.registry import DEFAULT_SCENARIO

    return f"{default_yardstick()} on {DEFAULT_SCENARIO}"


def heterogeneous_yardstick() -> str:
    """The yardstick of every registered scenario whose GPU types differ in speed by at least the
    migration threshold (one rule: the docs say "the yardstick on heterogeneous clusters")."""
    import cluster_env
    from baselines.migrate import DEFAULT_MIGRATE_THRESHOLD
    from baselines.registry import speed_spread
    from baselines.yardstick import yardstick

    rules = set()
    for name in cluster_env.list_scenarios():
        s = cluster_env.get_scenario(name)
        if not name.endswith("-v0") and speed_spread(s.cluster().gpu_type_names, s.world.reference_gpu) \
                >= DEFAULT_MIGRATE_THRESHOLD:
            rules.add(yardstick(name))
    if len(rules) != 1:
        raise ValueError(f"the heterogeneous scenarios have several yardsticks: {sorted(rules)}")
    return f"`{rules.pop()}`"


def pending_windows() -> str:
    """K, the pending window, per scenario (the scenario's ``SchedulingConfig``) and the config's
    own default."""
    import cluster_env
    from cluster_env.core.config import SchedulingConfig

    by_k: dict[int, list[str]] = {}
    for name in cluster_env.list_scenarios():
        by_k.setdefault(cluster_env.get_scenario(name).scheduling.pending_window, []).append(name)
    later = sorted(n for n in cluster_env.list_scenarios() if not n.endswith("-v0"))
    parts = []
    for k, names in sorted(by_k.items(), reverse=True):
        if sorted(names) == later:
            who = f"every scenario after v0, `{cluster_env.DEFAULT_SCENARIO}` (the default) included"
        else:
            who = _names(sorted(names))
        parts.append(f"{k} on {who}")
    return (f"the scenario's: {'; '.join(parts)}; {SchedulingConfig().pending_window} in a "
            "`SchedulingConfig()` built without one")


def load_sweep_table(figures: dict) -> str:
    sweep = figures["load_sweep"]
    policies, ref = sweep["policies"], sweep["reference"]
    rows = ["| load | " + " | ".join(policies) + " |", "|---:|" + "---:|" * len(policies)]
    for load in sweep["loads"]:
        cells = []
        for p in policies:
            r = sweep["rows"][p][format(load, "g")]
            cell = f"{r['avg_jct']:,.0f} s"
            if p != ref:
                cell += f" ({r['ratio_avg_jct']:.2f})"
            cells.append(cell)
        rows.append(f"| {load:g} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


#: Where the dynamics, the steps and the observations are written, by room: (what, files now, lines at
#: 768b726, the commit before the compiled step ran the parallel env; counted there with
#: ``git show 768b726:FILE | wc -l``, the compiled step then in ``cluster_env/vector/_compiled_step.py``).
DYNAMICS_ROOMS = (
    ("the Python simulator", ("cluster_env/core/simulator.py",), 1100),
    ("its per-event kernels (numba, numpy twins)", ("cluster_env/core/kernels.py",), 1395),
    ("the compiled engine: state, dynamics, the step", ("cluster_env/core/engine/*.py",), 1375 + 318),
    ("the compiled step's faces: the parallel env's episodes, the vector backends",
     ("cluster_env/envs/compiled_episodes.py", "cluster_env/vector/compiled.py", "cluster_env/vector/backend.py"),
     244 + 265),
    ("the compiled harness: its loop and decision rules", ("baselines/engine/_loop.py", "baselines/engine/__init__.py"),
     1007 + 422),
    ("observation kernels of the extended layouts",
     ("cluster_env/envs/observation_place.py", "cluster_env/envs/observation_fused.py"), 250 + 139),
    ("the PettingZoo env's step, reset and hand-off", ("cluster_env/envs/cluster_parallel.py",), 595),
)


def dynamics_lines() -> str:
    """The table of docs/architecture.md: lines per room at 768b726 and now."""
    rows = ["| room | files | lines at 768b726 | lines now |", "|---|---|---:|---:|"]
    before_total = now_total = 0
    for what, patterns, before in DYNAMICS_ROOMS:
        files = sorted({p for pat in patterns for p in ROOT.glob(pat)})
        now = sum(len(p.read_text().splitlines()) for p in files)
        names = ", ".join(f"`{pat}`" for pat in patterns)
        rows.append(f"| {what} | {names} | {before:,} | {now:,} |")
        before_total, now_total = before_total + before, now_total + now
    rows.append(f"| **all** | | **{before_total:,}** | **{now_total:,}** |")
    return "\n".join(rows)


#: Percentiles of k that docs/objectives.md quotes from the shipped Chronus quantile function.
CHRONUS_QUOTED_PERCENTILES = (0, 1, 5, 10, 25, 50, 75, 90, 95, 99, 100)


def chronus_traces() -> str:
    """The table of docs/objectives.md: per Chronus trace, its jobs, SLO share and k's correlations."""
    from cluster_env.scenarios.objectives import CHRONUS_DEADLINE_TRACE, CHRONUS_TRACES_FILE, read_chronus_table

    rows = ["| trace | jobs | SLO jobs (strict + soft) | best-effort | SLO share | Spearman k, duration "
            "| k, GPUs | k, submit |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in read_chronus_table(CHRONUS_TRACES_FILE):
        name = f"**{r['trace']}**" if r["trace"] == CHRONUS_DEADLINE_TRACE else r["trace"]
        rows.append(f"| {name} | {r['jobs']:,} | {r['slo_jobs']:,} ({r['strict_jobs']:,} + {r['soft_jobs']:,}) "
                    f"| {r['best_effort_jobs']:,} | {r['slo_share']:.4f} | {r['spearman_k_duration']:.2f} "
                    f"| {r['spearman_k_gpus']:.2f} | {r['spearman_k_submit']:.2f} |")
    return "\n".join(rows)


def chronus_k_quantiles() -> str:
    """The table of docs/objectives.md: quantiles of k per Chronus trace, from the shipped file."""
    from cluster_env.scenarios.objectives import CHRONUS_DEADLINE_TRACE, CHRONUS_TRACES_FILE, load_deadline_factors, \
        read_chronus_table

    traces = [r["trace"] for r in read_chronus_table(CHRONUS_TRACES_FILE)]
    factors = {t: load_deadline_factors(t) for t in traces}
    names = [f"**{t}**" if t == CHRONUS_DEADLINE_TRACE else t for t in traces]
    rows = ["| percentile of k | " + " | ".join(names) + " |", "|---:|" + "---:|" * len(traces)]
    for p in CHRONUS_QUOTED_PERCENTILES:
        rows.append(f"| {p} | " + " | ".join(f"{factors[t].k[p]:.2f}" for t in traces) + " |")
    return "\n".join(rows)


def chronus_k_by_duration() -> str:
    """The table of docs/objectives.md: k by duration band in the sampled Chronus trace."""
    from cluster_env.scenarios.objectives import CHRONUS_BANDS_FILE, CHRONUS_DEADLINE_TRACE, read_chronus_table

    rows = [f"| duration ({CHRONUS_DEADLINE_TRACE}, minutes) | SLO jobs | k p10 | k p50 | k p90 |",
            "|---|---:|---:|---:|---:|"]
    for r in read_chronus_table(CHRONUS_BANDS_FILE):
        if r["trace"] == CHRONUS_DEADLINE_TRACE:
            band = f"{r['duration_min_lo']:,}+" if r["duration_min_hi"] is None else \
                f"{r['duration_min_lo']:,}-{r['duration_min_hi']:,}"
            rows.append(f"| {band} | {r['slo_jobs']:,} | {r['k_p10']:.2f} | {r['k_p50']:.2f} | {r['k_p90']:.2f} |")
    return "\n".join(rows)


def measured_speed_families() -> str:
    """docs/world_model.md: each Gavel job family's speed over V100 on A100, H800 and T4 under the
    two measured rules (``cluster_env.world.measured_speeds.family_ratio_table``)."""
    from cluster_env.world.measured_speeds import family_ratio_table

    rows = ["| family | Sia model | A100 `measured` | A100 `measured-best` | H800 `measured` | "
            "H800 `measured-best` | T4 `measured` | T4 `measured-best` |", "|---|---|---:|---:|---:|---:|---:|---:|"]
    for r in family_ratio_table():
        model = f"`{r['model']}`" if r["model"] else "median of the retained"
        cells = [f"{r[g][rule]:.3f}" for g in ("A100", "H800", "T4") for rule in ("measured", "measured-best")]
        rows.append(f"| {r['family']} | {model} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def measured_best_models() -> str:
    """docs/world_model.md: each Sia model's best one-GPU configuration on each server and the two
    rules' ratios (``cluster_env.world.measured_speeds.best_throughput_table``)."""
    from cluster_env.world.measured_speeds import best_throughput_table

    table = best_throughput_table()
    t4 = {r["model"]: r for r in table if r["gpu"] == "T4"}
    rows = ["| model | V100 best: batch, samples/s | A100 best | A100/V100 best | A100/V100 median | "
            "T4 best | T4/V100 best | T4/V100 median | retained |", "|---|---|---|---:|---:|---|---:|---:|---|"]
    for r in (r for r in table if r["gpu"] == "A100"):
        t = t4[r["model"]]
        rows.append(f"| {r['model']} | {r['v100_bsz']}, {r['v100_rate']:,.1f} | {r['bsz']}, {r['rate']:,.1f} | "
                    f"{r['best']:.3f} | {r['median']:.3f} | {t['bsz']}, {t['rate']:,.1f} | {t['best']:.3f} | "
                    f"{t['median']:.3f} | {'yes' if r['retained'] else 'no (excluded)'} |")
    return "\n".join(rows)


def load_figures() -> dict:
    return json.loads(FIGURES.read_text())


#: Every generated part: name -> (page, generator). Pages may hold each name once.
SECTIONS: dict[str, tuple[str, Callable[[], str]]] = {
    "headline": ("README.md", lambda: headline(load_figures())),
    "scenarios": ("README.md", scenario_table),
    "scenario-defaults": ("README.md", scenario_defaults),
    "score-files": ("README.md", score_files_count),
    "cli-usage": ("docs/baselines.md", cli_usage),
    "scores-check-line": ("docs/baselines.md", scores_check_line),
    "load-sweep-table": ("docs/baselines.md", lambda: load_sweep_table(load_figures())),
    "heterogeneous-yardstick": ("docs/baselines.md", heterogeneous_yardstick),
    "tutorial-yardstick": ("docs/tutorial.md", default_yardstick_on),
    "reference-yardstick": ("docs/reference.md", default_yardstick),
    "pending-window": ("docs/reference.md", pending_windows),
    "queueing-card": ("docs/reference.md", queueing_card),
    "dynamics-lines": ("docs/architecture.md", dynamics_lines),
    "chronus-traces": ("docs/objectives.md", chronus_traces),
    "chronus-k-quantiles": ("docs/objectives.md", chronus_k_quantiles),
    "chronus-k-by-duration": ("docs/objectives.md", chronus_k_by_duration),
    "measured-speed-families": ("docs/world_model.md", measured_speed_families),
    "measured-best-models": ("docs/world_model.md", measured_best_models),
}


# ----------------------------------------------------------------------------- pages
def generated_parts(text: str) -> dict[str, str]:
    """The generated parts of a page: name -> what is between its markers."""
    return {m.group("name"): m.group("body") for m in MARKER.finditer(text)}


def _wrap(body: str, block: bool) -> str:
    return f"\n{body}\n" if block else body


def is_block(generated: str) -> bool:
    return generated.startswith(("```", "|"))


def render(page: str, text: str) -> str:
    """``text`` with every generated part of ``page`` replaced by its generator's output."""
    def replace(m: re.Match) -> str:
        name = m.group("name")
        if name not in SECTIONS or SECTIONS[name][0] != page:
            raise KeyError(f"{page}: unknown generated part {name!r}")
        body = SECTIONS[name][1]()
        return f"{m.group(1)}{_wrap(body, is_block(body))}{m.group(4)}"

    return MARKER.sub(replace, text)


def stale_pages() -> dict[str, str]:
    """Pages whose generated parts differ from the generators: page -> the text they should have."""
    out = {}
    for page in sorted({p for p, _ in SECTIONS.values()}):
        text = (ROOT / page).read_text()
        missing = [n for n, (p, _) in SECTIONS.items() if p == page and n not in generated_parts(text)]
        if missing:
            raise KeyError(f"{page} lacks the generated part(s) {missing}")
        new = render(page, text)
        if new != text:
            out[page] = new
    return out


# ----------------------------------------------------------------------------- measurements
def measure_headline(backend: str = "auto", seeds: Optional[str] = None) -> dict:
    """:data:`HEADLINE` measured: the paired ratio of the agent to the reference (``seeds``: fewer
    windows, for a smoke test)."""
    from baselines.cli import parse_seeds
    from baselines.harness.stats import paired_summary
    from baselines.harness.sweep import make_tasks, run_tasks

    h = dict(HEADLINE, seeds=seeds or HEADLINE["seeds"])
    seeds = parse_seeds(h["seeds"])
    tasks = make_tasks([h["agent"], h["reference"]], [h["scenario"]], h["split"], seeds, {})
    records = [r.record for r in run_tasks(tasks, backend=backend)]
    s = paired_summary(records, h["agent"], h["reference"], h["metric"])
    return {**h, "geo_mean": round(s.geo_mean, 6), "ci_low": round(s.ci_low, 6), "ci_high": round(s.ci_high, 6),
            "wins": int(s.wins), "windows": int(s.distinct), "mean": round(s.mean, 3),
            "reference_mean": round(s.reference_mean, 3)}


def measure_load_sweep(backend: str = "auto", out: Optional[Path] = None, **smaller: Any) -> dict:
    """:data:`LOAD_SWEEP` measured (``smaller`` replaces its settings, for a smoke test); with
    ``out``, the sweep's files and picture are written there too."""
    from baselines.cli import parse_seeds
    from baselines.harness.load_sweep import run_load_sweep, write_sweep

    cfg = {**LOAD_SWEEP, **smaller}
    sweep = run_load_sweep(cfg["scenario"], cfg["loads"], cfg["policies"], parse_seeds(cfg["seeds"]), cfg["split"],
                           reference=cfg["reference"], backend=backend)
    if out is not None:
        write_sweep(sweep, out)
    rows: dict[str, dict[str, dict]] = {}
    for r in sweep.rows:
        rows.setdefault(r["policy"], {})[format(r["load"], "g")] = {
            "avg_jct": round(r["avg_jct"], 3), "ratio_avg_jct": round(r["ratio_avg_jct"], 6)}
    return {**cfg, "rows": rows}


def measure() -> dict:
    return {"headline": measure_headline(), "load_sweep": measure_load_sweep(),
            "made_by": "python benchmarks/docs_current.py --measure"}


def draw_images() -> list[Path]:
    """docs/img: the load sweep of docs/baselines.md and the paired plot of the default run."""
    import tempfile

    from baselines.cli import main as cluster_bench

    img = ROOT / "docs" / "img"
    with tempfile.TemporaryDirectory() as tmp:
        measure_load_sweep(out=Path(tmp) / "sweep")
        (img / "load_sweep_philly_v1.png").write_bytes((Path(tmp) / "sweep" / "load_sweep.png").read_bytes())
        assert cluster_bench(["run", "--out", str(Path(tmp) / "run"), "--quiet"]) == 0
        (img / "paired_philly_v1.png").write_bytes((Path(tmp) / "run" / "paired_avg_jct.png").read_bytes())
    return [img / "load_sweep_philly_v1.png", img / "paired_philly_v1.png"]


def main(argv: Optional[list[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--check", action="store_true", help="exit 1 if a generated part is stale")
    p.add_argument("--write", action="store_true", help="rewrite the generated parts")
    p.add_argument("--measure", action="store_true", help="rerun the measured figures into docs/figures.json")
    p.add_argument("--images", action="store_true", help="redraw docs/img/*.png")
    args = p.parse_args(argv)
    if args.measure:
        figures = measure()
        FIGURES.write_text(json.dumps(figures, indent=2) + "\n")
        print(f"wrote {FIGURES.relative_to(ROOT)}: headline {figures['headline']['geo_mean']:.3f} "
              f"[{figures['headline']['ci_low']:.3f}, {figures['headline']['ci_high']:.3f}]")
    if args.images:
        for path in draw_images():
            print(f"wrote {path.relative_to(ROOT)}")
    stale = stale_pages()
    if args.write:
        for page, text in stale.items():
            (ROOT / page).write_text(text)
            print(f"rewrote the generated parts of {page}")
        return 0
    if stale:
        print("stale generated parts in: " + ", ".join(stale) + " (python benchmarks/docs_current.py --write)")
        return 1 if args.check else 0
    print("the generated parts of the docs are current")
    return 0


if __name__ == "__main__":
    sys.exit(main())
