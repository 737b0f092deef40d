"""A run resolves each policy name once: one parse, one policy object, passed along to the
checks, the labels, the workers and the compiled engine; the environment settings a policy needs
are read without building an environment; and a worker process builds a policy at most once.

The counts are taken with wrappers around the one parse of a baseline name
(``baselines.registry.policy_parts``), the policy object of a baseline
(``baselines.policy.ComposedPolicy``) and the environment (``ClusterParallelEnv``).
"""
from __future__ import annotations

import collections
import os
import pickle
from pathlib import Path

import numpy as np
import pytest

from baselines.registry import NAMED, OBJECTIVE_BASELINES
from cluster_env.wrappers.policies import FirstAllowedPolicy

ROOT = Path(__file__).resolve().parents[1]
#: The file CountedPolicy appends its process id to, one line per object built (any process).
LOG_ENV = "CLUSTER_BENCH_TEST_BUILD_LOG"


class CountedPolicy(FirstAllowedPolicy):
    """FIFO + first-fit that writes down every time it is built, and in which process."""

    name = "counted"

    def __init__(self) -> None:
        with open(os.environ[LOG_ENV], "a", encoding="utf-8") as log:
            log.write(f"{os.getpid()}\n")


@pytest.fixture
def counts(monkeypatch):
    """Counters of parses and builds per policy name and of environments built before and
    during the episodes (``run_tasks`` starts them)."""
    import baselines.registry as registry
    from baselines.harness import sweep
    from baselines.policy import ComposedPolicy
    from cluster_env.envs.cluster_parallel import ClusterParallelEnv

    seen: dict = {"parse": collections.Counter(), "build": collections.Counter(), "env": collections.Counter()}
    phase = ["before episodes"]
    parts, build, env_init, run_tasks = (registry.policy_parts, ComposedPolicy.__init__, ClusterParallelEnv.__init__,
                                         sweep.run_tasks)

    def counted_parts(name, *a, **k):
        seen["parse"][name.strip().lower()] += 1
        return parts(name, *a, **k)

    def counted_build(self, orderer, placer, name=None):
        seen["build"][name] += 1
        build(self, orderer, placer, name)

    def counted_env(self, *a, **k):
        seen["env"][phase[0]] += 1
        env_init(self, *a, **k)

    def episodes(*a, **k):
        phase[0] = "episodes"
        return run_tasks(*a, **k)

    monkeypatch.setattr(registry, "policy_parts", counted_parts)
    monkeypatch.setattr(ComposedPolicy, "__init__", counted_build)
    monkeypatch.setattr(ClusterParallelEnv, "__init__", counted_env)
    monkeypatch.setattr(sweep, "run_tasks", episodes)
    return seen


def test_cluster_bench_run_resolves_each_policy_once(counts, tmp_path, capsys):
    """``cluster-bench run --policies las-migrate,fifo`` (in one process: the serial backend): each
    name parsed once and built once, and one environment before the first episode (the one built
    from the run's own arguments, which checks them and gives the world line and the arrivals
    note). It used to parse each name 11-12 times, build each policy 5 times (more on a cold
    numba cache, whose warm-up ranks the tasks) and build 5 environments before the first episode
    (one to check the arguments, one per policy just to check it, two to read the world line and
    the arrivals)."""
    from baselines.cli import main

    out = tmp_path / "run"
    code = main(["run", "--policies", "las-migrate,fifo", "--scenario", "philly-v1", "--seeds", "0-1",
                 "--out", str(out), "--backend", "serial", "--workers", "1", "--quiet"])
    assert code == 0, capsys.readouterr().err
    assert (out / "results.json").is_file() and (out / "timeline_las-migrate.png").is_file()
    assert _of(counts["parse"], "las-migrate", "fifo") == {"las-migrate": 1, "fifo": 1}
    assert _of(counts["build"], "las-migrate", "fifo") == {"las-migrate": 1, "fifo": 1}
    assert counts["env"]["before episodes"] == 1
    assert counts["env"]["episodes"] >= 2         # the episodes' own (recorded ones through the API)


def _of(counter: collections.Counter, *names: str) -> dict:
    """The counts of ``names`` (a cold cache's warm-up plays a policy of its own, tiresias+fastest)."""
    return {name: counter[name] for name in names}


def test_compare_and_evaluate_resolve_each_policy_once(counts, tmp_path):
    """The other ways in: ``cluster-bench compare`` and ``baselines.evaluate`` resolve a name once
    for all their episodes, whichever engine plays them."""
    import baselines
    from baselines.cli import main

    code = main(["compare", "las", "fifo", "--scenario", "toy-v0", "--seeds", "0-2", "--backend", "serial", "--quiet"])
    assert code == 0
    assert _of(counts["parse"], "las", "fifo") == {"las": 1, "fifo": 1}
    assert _of(counts["build"], "las", "fifo") == {"las": 1, "fifo": 1}
    records = baselines.evaluate("sjf+spread", "toy-v0", seeds=range(3), backend="serial")
    assert [r["policy"] for r in records] == ["sjf+spread"] * 3
    assert _of(counts["parse"], "sjf+spread") == {"sjf+spread": 1}
    assert _of(counts["build"], "sjf+spread") == {"sjf+spread": 1}


def test_a_resolution_travels_without_its_object_and_a_process_builds_it_once():
    """Pickled (to a worker), a resolved policy leaves its object behind; every copy that lands in
    one process shares the one object built there from the parsed name."""
    from baselines.harness.resolve import resolve_once
    from baselines.registry import PolicyName

    resolved = resolve_once("LAS-Migrate", "philly-v1")
    assert resolved.baseline == PolicyName("las-migrate", "las-migrate", "fastest")
    here = resolved.policy()
    assert resolved.name == here.name == "las-migrate" and here.env_overrides["observation"] == "extended-v2"
    assert resolved.policy() is here
    first, second = (pickle.loads(pickle.dumps(resolved)) for _ in range(2))
    assert first._policy is None and second._policy is None
    assert first.policy() is second.policy() and first.policy() is not here
    assert first.policy().name == "las-migrate"
    assert resolve_once("las-migrate", "philly-v1").token != resolved.token     # a new run: a new object


def test_process_workers_build_a_named_policy_once_each(tmp_path, monkeypatch):
    """The process backend: the main process builds the policy once (checking it), each worker
    once for all the episodes it plays (it used to be once per episode)."""
    from baselines.harness.sweep import make_tasks, run_tasks

    log = tmp_path / "builds.txt"
    monkeypatch.setenv(LOG_ENV, str(log))
    monkeypatch.chdir(ROOT)
    tasks = make_tasks([f"{__name__}:CountedPolicy"], ["toy-v0"], "test", range(6))
    assert log.read_text().split() == [str(os.getpid())]
    results = run_tasks(tasks, backend="process", workers=2)
    assert [r.record["seed"] for r in results] == list(range(6))
    builds = collections.Counter(log.read_text().split())
    assert builds.pop(str(os.getpid())) == 1
    assert 1 <= len(builds) <= 2 and set(builds.values()) == {1}


@pytest.mark.parametrize("scenario,names", [
    ("philly-hetero-v1", [n for n in NAMED if n not in OBJECTIVE_BASELINES]),
    ("philly-tenants-v1", list(OBJECTIVE_BASELINES))])      # they read the jobs' classes and quotas
def test_one_object_over_many_episodes_plays_as_fresh_ones(scenario, names):
    """A policy reused across episodes (a worker's, since it builds once) gives the records of a
    new object per episode: ``reset(seed)`` starts each episode afresh, whatever the episodes
    before. Every named baseline, through the API (the compiled engine only reads the object)."""
    from baselines.harness.episode import run_episode
    from baselines.harness.resolve import resolve_policy

    kw = {"jobs_per_episode": 60}
    for name in names:
        reused = resolve_policy(name, scenario)
        for seed in (2, 0, 1):
            fresh = run_episode(resolve_policy(name, scenario), scenario, "test", seed, kw).record
            again = run_episode(reused, scenario, "test", seed, kw).record
            differ = [k for k in fresh if k != "wall_s" and not _same(fresh[k], again[k])]
            assert not differ, (name, seed, differ)
            assert np.isfinite(fresh["avg_jct"])


def _same(a, b) -> bool:
    """Equal to the bit, NaN equal to NaN (an undefined metric of both)."""
    if isinstance(a, float) and isinstance(b, float) and np.isnan(a) and np.isnan(b):
        return True
    return type(a) is type(b) and a == b
