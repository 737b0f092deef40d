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
