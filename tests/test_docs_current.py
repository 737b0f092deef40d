"""The numbers and defaults that README.md and docs/ quote are the code's: the generated parts equal
their generator's output (``benchmarks/docs_current.py``), the measured figures they quote equal a
fresh measurement (slow), and the claims written by hand name only what the code has."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import cluster_env
from tests.helpers import load_script

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


docs_current = load_script("benchmarks/docs_current.py")
README = (ROOT / "README.md").read_text()


def test_generated_parts_of_the_docs_are_current():
    stale = docs_current.stale_pages()
    assert not stale, (f"stale generated parts in {sorted(stale)}: run python benchmarks/docs_current.py --write "
                       "(and --measure where a measured figure moved)")


def test_a_stale_generated_part_is_caught_and_rewritten():
    text = README.replace("| **`philly-hetero-v2`** |", "| **`philly-hetero-v9`** |")
    assert text != README
    assert docs_current.render("README.md", text) == README
    edited = re.sub(r"(<!-- generated: score-files -->)\d+", r"\g<1>4", README)
    assert edited != README and docs_current.render("README.md", edited) == README


def test_scenario_table_lists_every_registered_scenario_once():
    part = docs_current.generated_parts(README)["scenarios"]
    names = re.findall(r"^\| \**`([\w-]+)`", part, re.M)
    assert names == cluster_env.list_scenarios()


def test_cli_usage_shows_the_parser_defaults():
    usage = docs_current.generated_parts((ROOT / "docs" / "baselines.md").read_text())["cli-usage"]
    seeds = docs_current.seeds_text(docs_current.option_default("run", "--seeds"))
    reference = docs_current.option_default("run", "--reference")
    assert f"[--scenario {cluster_env.DEFAULT_SCENARIO}]" in usage and f"[--seeds {seeds}]" in usage
    assert f"[--reference {reference}]" in usage if reference else "[--reference REFERENCE]" in usage
    assert "[--seeds 0-4]" not in usage.split("cluster-bench scores")[0]       # the old default of run/compare


def test_readme_headline_is_the_checked_in_measurement_over_100_windows():
    figures = docs_current.load_figures()
    h = figures["headline"]
    assert h["windows"] == 100 and h["seeds"] == "0-99" and h["split"] == "test"      # docs/design.md section 9
    sentence = docs_current.generated_parts(README)["headline"]
    assert f"{h['geo_mean']:.3f} [{h['ci_low']:.3f}, {h['ci_high']:.3f}]" in sentence
    assert "0.953 [0.899, 0.999]" not in README
    shipped = docs_current.shipped_agents()
    assert h["scenario"] in shipped["priority"] + shipped["paper"]            # the agent it quotes ships


def test_default_reference_is_the_one_the_docs_name():
    from baselines.yardstick import yardstick
    from cluster_env.scenarios.registry import DEFAULT_SCENARIO

    # no --reference default in the parser: the scenario's yardstick, named in one place
    assert docs_current.option_default("run", "--reference") is None
    expected = f"paired ratio to the scenario's yardstick (`{yardstick(DEFAULT_SCENARIO)}` on `{DEFAULT_SCENARIO}`)"
    for start in ("`run` prints, per policy", "Install and run the main job"):
        paragraph = " ".join(README[README.index(start):][:600].split())
        assert expected in paragraph, f"the README says what `run`'s ratios are taken against: {expected}"
    assert "The default reference is the scenario's **yardstick**" in (ROOT / "docs" / "baselines.md").read_text()


def test_every_yardstick_the_docs_name_is_the_codes():
    """A sentence on a yardstick that names a rule on a scenario (`las-migrate` on philly-v1) names
    baselines/yardstick.py's; "the yardstick on heterogeneous clusters" is every heterogeneous
    scenario's; the pages quote the default scenario's."""
    from baselines.yardstick import DURATION_BLIND_RULES, YARDSTICKS, yardstick

    named = []
    for path in DOCS:
        text = " ".join(re.sub(r"<!--.*?-->", "", path.read_text()).split())
        for sentence in re.split(r"(?<=[.;:])\s+(?=[A-Z(`*])", text):
            if not re.search(r"\byardstick\b(?!\.py)", sentence, re.I):
                continue
            for rule, scenario in re.findall(r"`([\w+.-]+)`,? (?:on|of|for) `?([a-z]+(?:-[a-z]+)*-v\d+)`?", sentence):
                if scenario in YARDSTICKS and (rule in DURATION_BLIND_RULES or "+" in rule):
                    named.append((path.name, rule, scenario))
                    assert rule == YARDSTICKS[scenario], f"{path.name} names {rule} as {scenario}'s yardstick: {sentence}"
            for rule in re.findall(r"`([\w+.-]+)` is the yardstick on heterogeneous clusters", sentence):
                assert f"`{rule}`" == docs_current.heterogeneous_yardstick(), (path.name, sentence)
                named.append((path.name, rule, "heterogeneous"))
    assert {(p, s) for p, _, s in named} >= {("tutorial.md", cluster_env.DEFAULT_SCENARIO),
                                             ("README.md", cluster_env.DEFAULT_SCENARIO), ("baselines.md", "heterogeneous")}
    reference = " ".join((ROOT / "docs" / "reference.md").read_text().split())
    assert f"the default run now pairs with the yardstick, <!-- generated: reference-yardstick -->" \
           f"`{yardstick(cluster_env.DEFAULT_SCENARIO)}`" in reference


def test_the_pending_window_the_docs_quote_is_the_scenarios():
    """K as the docs quote it: each scenario's own, generated (runs print K=256 on philly-v1)."""
    from cluster_env.core.config import SchedulingConfig

    reference = " ".join((ROOT / "docs" / "reference.md").read_text().split())
    part = docs_current.generated_parts(reference)["pending-window"]
    k_default = cluster_env.get_scenario(cluster_env.DEFAULT_SCENARIO).scheduling.pending_window
    assert f"{k_default} on every scenario after v0, `{cluster_env.DEFAULT_SCENARIO}` (the default) included" in part
    assert f"{SchedulingConfig().pending_window} in a `SchedulingConfig()`" in part
    for name in cluster_env.list_scenarios():
        k = cluster_env.get_scenario(name).scheduling.pending_window
        assert f"`{name}`" not in part or re.search(rf"{k} on [^;]*`{name}`", part), name
    k_v0 = cluster_env.get_scenario("philly-v0").scheduling.pending_window
    assert f"the pending window is {k_default} jobs (v0: {k_v0})" in reference


def test_the_tutorial_scores_its_agent_on_windows_of_the_size_it_trained_on():
    """The tutorial's agent trains on short windows; both scoring lines use that size, and the note
    says what the scenario's whole windows are (the scenario's, and example 03's default)."""
    text = (ROOT / "docs" / "tutorial.md").read_text()
    jobs = re.search(r'gymnasium\.make\("cluster_env/HeteroClusterFlat-v1", jobs_per_episode=(\d+)\)', text).group(1)
    assert f'env_kwargs={{"jobs_per_episode": {jobs}}}' in text
    lines = [line for line in text.splitlines() if line.startswith("cluster-bench run") and "ppo_model.zip" in line]
    assert lines and all(f"--env jobs_per_episode={jobs}" in line for line in lines), lines
    whole = cluster_env.get_scenario(cluster_env.DEFAULT_SCENARIO).jobs_per_episode
    said = " ".join(text.split())
    assert f"The agent above trained on {jobs}-job windows" in said
    assert f"the scenario's whole windows ({whole:,} jobs on {cluster_env.DEFAULT_SCENARIO})" in said
    example = load_script("examples/03_train_maskable_ppo.py", "example_03_for_docs")
    assert example.parse_args([]).jobs_per_episode == whole


def test_scheduling_defaults_quoted_in_the_reference():
    from cluster_env.core.config import SchedulingConfig

    text = (ROOT / "docs" / "reference.md").read_text()
    c = SchedulingConfig()
    assert f"`K = pending_window` (<!-- generated: pending-window -->{docs_current.pending_windows()}<!-- end: " \
           f"pending-window -->), `R = running_window` ({c.running_window} with preemption, else 0)" in text.replace("\n", " ")
    baselines_md = (ROOT / "docs" / "baselines.md").read_text()
    assert f"every `scheduling_tick` = {c.scheduling_tick:g} s by default" in baselines_md.replace("\n", " ")


def test_every_named_baseline_in_the_readme_list_and_no_other():
    from baselines.registry import NAMED

    listed = README[README.index("The named baselines ("):README.index("and their orderers")]
    names = set(re.findall(r"`([\w-]+)`", listed)) - {"las-q"}
    assert names == set(NAMED), f"README lists {sorted(names)}, the registry has {sorted(NAMED)}"


# A policy name in a command of the docs: each must resolve today.
_POLICIES = re.compile(r"--polic(?:ies|y)[ =]([^\s`]+)")
#: ``compare A B``, or ``compare A`` then an option (B is the yardstick then: no second name).
_COMPARE = re.compile(r"cluster-bench compare ([^\s`-][^\s`]*)(?: ([^\s`-][^\s`]*))?")


def _quoted_policy_names() -> set[str]:
    names = set()
    for path in DOCS:
        text = path.read_text()
        for group in _POLICIES.findall(text):
            names.update(group.split(","))
        for a, b in _COMPARE.findall(text):
            names.update(n for n in (a, b) if n)
    # paths, plug-ins of the reader's own package, placeholders and shell variables are not names
    return {n.strip("\\.;:)") for n in names
            if n and not re.search(r"[/:<>${}\[\]]|\.(zip|pt|json)$|^(A|B|P|NAMES|POLICIES|\.\.\.)$", n)}


def test_policy_names_in_the_docs_commands_exist():
    from baselines.harness.sweep import plugin_policy_names, resolve_policy

    plugins = set(plugin_policy_names())
    names = _quoted_policy_names()
    assert {"fifo", "las-migrate", "tiresias+fastest"} <= names          # the scan finds commands
    unknown = []
    for name in sorted(names):
        if name in plugins:
            continue
        try:
            resolve_policy(name, cluster_env.DEFAULT_SCENARIO)            # as cluster-bench resolves it
        except Exception:  # noqa: BLE001 - any failure means the docs quote a name that does not work
            unknown.append(name)
    assert not unknown, f"the docs' commands use policy names that do not resolve: {unknown}"


def test_pending_window_and_splits_as_the_readme_says():
    for name in cluster_env.list_scenarios():
        s = cluster_env.get_scenario(name)
        expected = 8 if name == "toy-v0" else 32 if name.endswith("-v0") else 256
        assert s.scheduling.pending_window == expected, name
        if name != "toy-v0":
            assert s.splits == {"train": (0.0, 0.7), "validation": (0.7, 0.8), "test": (0.8, 1.0)}, name
    assert "32 on `philly-v0`,\n`openb-v0` and `openb-full-v0`" in README


def test_ci_checks_every_score_file():
    """The README says CI checks every scenario's score file: the regression test covers them all."""
    import ast

    from baselines.harness.scores import packaged_scenarios

    tree = ast.parse((ROOT / "tests" / "test_baselines_harness.py").read_text())
    test = next(f for f in tree.body if isinstance(f, ast.FunctionDef)
                and f.name == "test_checked_in_baseline_scores_have_not_moved")
    covered = next(ast.literal_eval(d.args[1]) for d in test.decorator_list
                   if isinstance(d, ast.Call) and getattr(d.func, "attr", "") == "parametrize")
    assert sorted(covered) == packaged_scenarios()


def test_default_scenario_where_the_docs_name_it():
    said = set()
    for path in DOCS:
        text = path.read_text()
        said.update(re.findall(r"default scenario,? `([\w-]+)`", text))
        said.update(re.findall(r"`cluster-bench (?:run|compare)` uses `([\w-]+)` by default", text))
    assert said == {cluster_env.DEFAULT_SCENARIO}, said           # found, and only the default


def test_figures_file_says_how_it_was_made():
    figures = json.loads((ROOT / "docs" / "figures.json").read_text())
    assert figures["made_by"] == "python benchmarks/docs_current.py --measure"
    assert set(figures) == {"headline", "load_sweep", "made_by"}


def test_measurement_smoke(tmp_path):
    """The measuring code runs (two windows; the full measurement is the slow test below)."""
    h = docs_current.measure_headline(seeds="0-1", backend="serial")
    assert h["windows"] == 2 and 0 < h["geo_mean"] < 10 and h["agent"] == "dual"
    sweep = docs_current.measure_load_sweep(backend="serial", seeds="0-1", loads=[1.0], policies=["fifo", "sjf"])
    assert sweep["rows"]["fifo"]["1"]["ratio_avg_jct"] == 1.0 and sweep["rows"]["sjf"]["1"]["avg_jct"] > 0


@pytest.mark.slow
def test_checked_in_figures_equal_a_fresh_measurement():
    """docs/figures.json (the README's headline and docs/baselines.md's load sweep) as measured now
    (about a minute on two cores)."""
    stored = docs_current.load_figures()
    fresh = docs_current.measure()
    for part in ("headline", "load_sweep"):
        assert json.dumps(fresh[part], sort_keys=True) == json.dumps(stored[part], sort_keys=True), part


def test_changelog_speaks_in_user_terms():
    """Entries say what a user gets, not which issue or section of the tracker asked for it."""
    text = (ROOT / "CHANGELOG.md").read_text()
    refs = re.findall(r".*\b(?:issues? \d+|sections? \d+|the [i]ssue's)\b.*", text, re.I)
    assert not refs, "CHANGELOG entries name tracker items instead of what changed for users:\n" + "\n".join(refs)


def test_dual_agent_page_lists_the_shipped_agents():
    text = (ROOT / "docs" / "dual_agent.md").read_text().replace("\n", " ")
    shipped = docs_current.shipped_agents()
    paper = re.search(r"`dual_agent/pretrained/<scenario>\.pt`: ([^)]*)\)", text).group(1)
    priority = re.search(r"`<scenario>\.priority\.json`: ([^)]*)\)", text).group(1)
    assert sorted(paper.split(", ")) == shipped["paper"] and sorted(priority.split(", ")) == shipped["priority"]


_REPO_PATH = re.compile(r"(?<![\w/.-])((?:cluster_env|baselines|dual_agent|benchmarks|examples|tests|docs)/"
                        r"[\w./-]+\.(?:py|md|json|csv|pt|png|txt))")


def test_files_the_docs_name_exist():
    missing = [f"{path.name}: {found}" for path in DOCS for found in sorted(set(_REPO_PATH.findall(path.read_text())))
               if not (ROOT / found).exists()]
    assert not missing, missing


def test_default_loads_in_the_reference_table_are_the_scenarios():
    text = (ROOT / "docs" / "reference.md").read_text()
    table = text[text.index("### Default loads, measured"):]
    bold = re.findall(r"^\| \*\*`([\w-]+)`, ([\d.]+)\*\* \|", table, re.M)
    assert {name for name, _ in bold} == {n for n in cluster_env.list_scenarios()     # every benchmark scenario
                                         if cluster_env.get_scenario(n).load is not None}
    for name, load in bold:
        assert cluster_env.get_scenario(name).load == float(load), name


def test_view_defaults_quoted_in_the_docs():
    from cluster_env.core.config import DEFAULT_STEPS_PER_JOB
    from cluster_env.wrappers._base import DEFAULT_INVALID_PENALTY

    quoted = set()
    for path in DOCS:
        # the bound, not a measured count (``at most 136 steps per job (`las` on ...)``)
        quoted.update(int(n) for n in re.findall(r"(\d+) steps per job(?! \(`)", path.read_text()))
    assert quoted == {DEFAULT_STEPS_PER_JOB}, quoted
    assert f"`invalid_penalty={DEFAULT_INVALID_PENALTY:g}`" in README


def test_training_defaults_quoted_in_the_dual_agent_page():
    from dual_agent.paper.config import DualAgentConfig, TrainConfig
    from dual_agent.priority.es import ESConfig

    text = (ROOT / "docs" / "dual_agent.md").read_text().replace("\n", " ")
    train, es = TrainConfig(), ESConfig()
    assert f"`--group-windows` windows (default {train.group_windows})" in text
    assert f"`--group-size` rollouts (default {train.group_size})" in text
    assert f"`--prior-bonus`, default {DualAgentConfig().prior_bonus:g};" in text
    assert f"its default {es.iterations} iterations" in text


def test_generator_command_line_checks(capsys):
    assert docs_current.main(["--check"]) == 0
    assert "current" in capsys.readouterr().out
