"""A fresh install's one-time compile happens before the progress bar starts (so its rate and
ETA count episodes only), and is announced (tests/test_reliability.py checks the note)."""
from __future__ import annotations

import baselines
from baselines import engine
from baselines.harness import sweep
from cluster_env.core import kernels


def test_cold_cache_compiles_before_the_progress_bar(monkeypatch):
    calls = []
    monkeypatch.setattr(kernels, "cache_is_cold", lambda: True)
    monkeypatch.setattr(kernels, "warm_up", lambda: calls.append("compile") or 0.0)
    original = sweep._progress
    monkeypatch.setattr(sweep, "_progress", lambda total, enabled: calls.append("bar") or original(total, enabled))
    # An API task (a policy object): the environment's kernels compile before the bar.
    tasks = sweep.make_tasks([baselines.make_policy("fifo")], ["toy-v0"], "test", [0], {"jobs_per_episode": 10})
    sweep.run_tasks(tasks, backend="serial")
    assert calls == ["compile", "bar"]
    calls.clear()
    monkeypatch.setattr(kernels, "cache_is_cold", lambda: False)   # a warm cache: no warm-up episode
    monkeypatch.setattr(kernels, "kernel_is_cold", lambda name: False)
    sweep.run_tasks(tasks, backend="serial")
    assert calls == ["bar"]
    calls.clear()
    monkeypatch.setattr(kernels, "cache_is_cold", lambda: True)    # engine episodes only: the
    monkeypatch.setattr(engine, "warm_up", lambda: calls.append("engine") or True)  # engine's warm-up
    if engine.engine_mode() != "api":
        sweep.run_tasks(sweep.make_tasks(["fifo"], ["toy-v0"], "test", [0], {"jobs_per_episode": 10}),
                        backend="serial")
        assert calls == ["engine", "bar"]


def test_cache_is_cold_reads_the_kernels_index_files(tmp_path, monkeypatch):
    if kernels.backend() != "numba":
        assert not kernels.cache_is_cold()
        return
    kernels.warm_up()
    assert not kernels.cache_is_cold()
    for dispatcher in vars(kernels.active()).values():       # every index file gone: cold
        index = getattr(getattr(getattr(dispatcher, "_cache", None), "_cache", None), "_cache_file", None)
        if index is not None:
            monkeypatch.setattr(index, "_index_path", str(tmp_path / "missing.nbi"))
    assert kernels.cache_is_cold()


def test_recorded_runs_warm_up_only_what_recorded_episodes_use(monkeypatch):
    """The main job's cold start: ``cluster-bench run`` records every episode (its
    plots), and recorded episodes never use the compiled skip-idle loop, so its warm-up leaves
    that loop (about 5 s of compile) out; an unrecorded API task warms up everything, also when
    only the fused loop is missing from the cache."""
    calls = []
    monkeypatch.setattr(kernels, "warm_up", lambda recorded=False: calls.append(("warm_up", recorded)) or 0.0)
    fifo = baselines.make_policy("fifo")
    kw = {"jobs_per_episode": 10}
    recorded = sweep.make_tasks([fifo], ["toy-v0"], "test", [0], kw, record_seeds=[0])
    plain = sweep.make_tasks([fifo], ["toy-v0"], "test", [0], kw)
    monkeypatch.setattr(kernels, "cache_is_cold", lambda: True)
    monkeypatch.setattr(kernels, "kernel_is_cold", lambda name: True)
    sweep._warm_up(recorded)
    sweep._warm_up(plain)
    assert calls == [("warm_up", True), ("warm_up", False)]
    calls.clear()
    monkeypatch.setattr(kernels, "cache_is_cold", lambda: False)    # a recorded run's cache
    sweep._warm_up(recorded)
    sweep._warm_up(plain)
    assert calls == [("warm_up", False)]


def test_recorded_warm_up_never_runs_the_fused_loop(monkeypatch):
    from cluster_env.core import simulator

    fused = []
    original = simulator.ClusterSimulator._advance_while_idle_compiled
    monkeypatch.setattr(simulator.ClusterSimulator, "_advance_while_idle_compiled",
                        lambda self, *a: fused.append(1) or original(self, *a))
    real_warm_up = kernels.warm_up
    real_warm_up(recorded=True)
    assert fused == []
    if kernels.backend() == "numba":
        real_warm_up()
        assert len(fused) > 10
