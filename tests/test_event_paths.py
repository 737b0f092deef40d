"""The compiled fast paths of the simulator and the observation ("through the API", docs/performance.md):
they skip work that cannot change a result, and give the same episodes as the numpy reference."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import cluster_env
from cluster_env.core import kernels, simulator
from cluster_env.world.fluctuation import FluctuationParams

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


_STRAGGLERS_ONLY = FluctuationParams(static_sigma=0.072, sigma=0.0, theta=1.0 / 80.0, interval=300.0,
                                     straggler_rate=4e-4, straggler_mean_duration=780.0, straggler_slowdown=0.2)
_OU_ONLY = FluctuationParams(static_sigma=0.072, sigma=0.048, theta=1.0 / 80.0, interval=120.0,
                             straggler_rate=0.0, straggler_mean_duration=780.0, straggler_slowdown=0.2)


@pytest.mark.parametrize("policy,seed,overrides", [
    ("fifo+spread", 10, {}),                                              # spread completions: the loop hands back
    ("fifo", 11, {"measurement_noise": 0.0}),                             # OU normals only
    ("fifo", 12, {"fluctuation_params": _STRAGGLERS_ONLY}),               # switches without OU draws
    ("fifo", 13, {"fluctuation_params": _OU_ONLY, "quiet_fluctuation_interval": 120.0}),   # never a switch
    ("fifo", 14, {"max_time": 200_000.0}),                                # the time limit inside the loop
    ("tiresias", 15, {"preemption": True, "restart_overhead": 30.0}),     # running candidates, restarts
    ("fifo", 16, {"all_effects_off": True, "jobs_per_episode": 300}),     # trivial measurement stamps
])
def test_compiled_skip_idle_loop_matches_numpy(policy, seed, overrides):
    """The skip-idle loop compiled as one call (kernels.idle_events: events, completions,
    arrivals, fluctuation updates with numpy's draws and exp) gives the numpy reference's
    episodes on each of its paths."""
    assert _digest("numba", "philly-v0", policy, seed, **overrides) == \
        _digest("numpy", "philly-v0", policy, seed, **overrides)


def test_reset_leaves_the_compiled_skip_idle_loop_to_step(monkeypatch):
    """A cold reset under 3 s: a reset reaches its first decision on the per-event path,
    so a fresh install shows the first observation without compiling ``idle_events`` (about 5 s of
    a cold reset's 7); the steps after it use the compiled loop, and the episode is the numpy
    reference's (the digest tests above)."""
    compiled = _counting(monkeypatch, "_advance_while_idle_compiled")
    skips = _counting(monkeypatch, "advance_while_idle")
    with kernels.use("numba"):
        env = cluster_env.parallel_env("philly-v0", split="test")
        obs, _ = env.reset(seed=0)
        assert env.sim._idle_kernel is not None and len(skips) == 1
        assert compiled == []
        for _ in range(50):
            obs, *_ = env.step({a: int(o["action_mask"].argmax()) for a, o in obs.items()})
    assert len(compiled) > 5


def test_skip_idle_epochs_run_in_the_compiled_loop(monkeypatch):
    """On philly-v0 (FIFO + first-fit) every event between decisions runs inside the compiled
    loop: the Python ``advance`` never runs, and the fluctuation updates run in Python only when a
    job spread over machines completes at the same event (a handful per episode)."""
    advances = _counting(monkeypatch, "advance")
    updates = _counting(monkeypatch, "_update_fluctuation")
    with kernels.use("numba"):
        env = cluster_env.parallel_env("philly-v0", split="test")
        obs, _ = env.reset(seed=0)
        assert env.sim._idle_kernel is not None
        while env.agents:
            obs, *_ = env.step({a: int(o["action_mask"].argmax()) for a, o in obs.items()})
    assert env.sim.events > 1000 and env.sim.done
    assert advances == [] and len(updates) < env.sim.events // 50
