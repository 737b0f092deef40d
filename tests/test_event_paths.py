"""The compiled fast paths of the simulator and the observation (issue 17, "through the API"):
they skip work that cannot change a result, and give the same episodes as the numpy reference."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import cluster_env
from cluster_env.core import kernels, simulator

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
from episode_digests import digest  # noqa: E402

pytestmark = pytest.mark.skipif("numba" not in kernels.available(), reason="numba is a dependency")


def _digest(backend: str, scenario: str, policy: str, seed: int, **overrides) -> tuple[str, int]:
    with kernels.use(backend):
        return digest(scenario, policy, seed, **overrides)


def _counting(monkeypatch, name: str) -> list:
    """Record the simulator method ``name``'s calls (their simulator and arguments)."""
    calls, original = [], getattr(simulator.ClusterSimulator, name)

    def wrapper(self, *args, **kwargs):
        calls.append((self, args))
        return original(self, *args, **kwargs)

    monkeypatch.setattr(simulator.ClusterSimulator, name, wrapper)
    return calls


def test_no_measurement_work_without_effects(monkeypatch):
    """With every effect off each measured speed is exactly 1 forever: the compiled path never runs
    the measurement (its times are stamped inside the per-event kernel), and the episode, measured
    speeds and ages included, is the numpy reference's, which measures at every event."""
    reference, steps = _digest("numpy", "philly-v0", "fifo", 0, all_effects_off=True)
    calls = _counting(monkeypatch, "_measure")
    with kernels.use("numba"):
        env = cluster_env.parallel_env("philly-v0", split="test", all_effects_off=True)
        env.reset(seed=0)
        assert env.sim._trivial_measure
    fast, fast_steps = _digest("numba", "philly-v0", "fifo", 0, all_effects_off=True)
    assert calls == []
    assert (fast, fast_steps) == (reference, steps) and steps > 100


@pytest.mark.parametrize("overrides", [
    {"all_effects_off": True, "measurement_noise": 0.05},        # noise: measured speeds move
    {"all_effects_off": True, "static_factors": True},           # machine factors
    {"all_effects_off": True, "contention": True},               # contention
    {"all_effects_off": True, "preemption": True, "restart_overhead": 30.0},   # restart overheads
])
def test_measurement_kept_where_an_effect_needs_it(overrides):
    """Any effect that can move a measured speed keeps the measurement (and the same episodes)."""
    with kernels.use("numba"):
        env = cluster_env.parallel_env("philly-v0", split="test", **overrides)
        env.reset(seed=1)
        assert not env.sim._trivial_measure
    policy = "tiresias" if overrides.get("preemption") else "fifo"
    assert _digest("numba", "philly-v0", policy, 1, **overrides) == _digest("numpy", "philly-v0", policy, 1, **overrides)


@pytest.mark.parametrize("scenario,policy,seed,overrides", [
    ("philly-v0", "tiresias", 6, {"all_effects_off": True, "preemption": True}),     # restarts, no overhead
    ("philly-v0", "fifo+spread", 7, {"fluctuation": False, "contention": False, "static_factors": False,
                                      "measurement_noise": 0.0}),                      # trivial, spread jobs
    ("philly-v0", "tiresias", 8, {"fluctuation": False, "contention": False, "preemption": True,
                                  "restart_overhead": 30.0}),        # speeds fixed per run, measured
    ("philly-v0", "fifo+spread", 9, {"fluctuation": False, "contention": False}),   # fixed, spread jobs
])
def test_compiled_launch_release_and_stamps_match_numpy(scenario, policy, seed, overrides):
    """Compiled starts and releases, speeds set once per run (no fluctuation, no contention) and
    trivial measurements give the numpy reference's episodes."""
    assert _digest("numba", scenario, policy, seed, **overrides) == _digest("numpy", scenario, policy, seed, **overrides)


def test_single_machine_starts_skip_the_python_launch(monkeypatch):
    """A job placed whole on one machine starts in one compiled call: the Python launch (a loop over
    its machines) runs only for jobs spread over several machines."""
    launches, original = [], simulator.ClusterSimulator._launch

    def launch(self, job):
        launches.append(len(self.alloc[job]))       # machines the job was placed on
        original(self, job)

    monkeypatch.setattr(simulator.ClusterSimulator, "_launch", launch)
    with kernels.use("numba"):
        env = cluster_env.parallel_env("philly-v0", split="test")
        obs, _ = env.reset(seed=0)
        while env.agents:
            obs, *_ = env.step({a: int(o["action_mask"].argmax()) for a, o in obs.items()})
    started = int(np.isfinite(env.sim.jobs.first_start).sum())
    assert started > 100 and len(launches) < started
    assert all(machines > 1 for machines in launches)


def test_machine_rows_follow_changes_and_many_measurement_times():
    """The compiled observation keeps a private machine block updated only where values changed,
    with a small memo of ages per measurement time; with fluctuation off (a measurement at every
    event) machines hold more distinct measurement times than the memo, and every observation is
    the numpy path's. Arrays handed out are copies: scribbling on them changes nothing later."""
    seen = []
    for backend in ("numpy", "numba"):
        with kernels.use(backend):
            env = cluster_env.parallel_env("philly-v0", split="test", fluctuation=False)
            obs, _ = env.reset(seed=3)
            rows, most = [], 0
            while env.agents:
                actions = {a: int(o["action_mask"].argmax()) for a, o in obs.items()}
                for o in obs.values():
                    rows.append(o["machines"].copy())
                    o["machines"][:] = -7.0          # a caller may modify what it receives
                obs, *_ = env.step(actions)
                at = env.sim.machines.measured_at
                most = max(most, len(np.unique(at[np.isfinite(at)])))
            seen.append((rows, most))
    (a, most), (b, _) = seen
    assert most > 8
    assert len(a) == len(b) and all(np.array_equal(x, y) for x, y in zip(a, b))
