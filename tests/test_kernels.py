"""The compiled (numba) and numpy kernels give the same bits: every observation, mask, reward,
info, state vector and metric of whole episodes, across the paths of the world model."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import cluster_env
from cluster_env.core import kernels
from cluster_env.world.fluctuation import FluctuationParams, FluctuationProcess

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
from episode_digests import digest  # noqa: E402  (the result-equality tool of benchmarks/)


def _episode_digest(backend: str, scenario: str, policy: str, seed: int, **overrides) -> tuple[str, int]:
    """Digest of everything an episode shows (benchmarks/episode_digests.py), with the Python
    simulator built on ``backend``'s kernels (the compiled step against it: test_parallel_engine)."""
    with kernels.use(backend) as k:
        assert k.name == backend and kernels.active() is k
        return digest(scenario, policy, seed, backend="python", **overrides)


CASES = [
    # (scenario, policy, seed, overrides): which paths they take
    ("philly-v0", "fifo", 0, {}),                                   # spread jobs, fluctuation, contention
    ("philly-v0", "tiresias+spread", 3, {"preemption": True, "restart_overhead": 60.0}),   # restarts
    ("openb-v0", "sjf+fastest", 1, {"clairvoyant": True}),          # allowed GPU types, remaining time
    ("philly-v0", "fifo+consolidate", 2, {"fluctuation": False}),   # measured at every event
    ("toy-v0", "random-masked", 4, {"preemption": True}),           # running candidates, random actions
    ("philly-v0", "sjf", 5, {"all_effects_off": True, "clairvoyant": True}),
]


@pytest.mark.parametrize("scenario,policy,seed,overrides", CASES)
def test_numba_and_numpy_kernels_give_identical_episodes(scenario, policy, seed, overrides):
    a, steps = _episode_digest("numpy", scenario, policy, seed, **overrides)
    b, steps_b = _episode_digest("numba", scenario, policy, seed, **overrides)
    assert steps == steps_b and steps > 10
    assert a == b


def test_machine_pool_compaction_keeps_results(monkeypatch):
    """The compiled layout's machine pool fills and compacts (and grows) without a change."""
    from cluster_env.core import simulator

    original = simulator.ClusterSimulator.__init__
    compactions = []

    def tiny_pool(self, *args, **kwargs):
        original(self, *args, **kwargs)
        self._mpool = np.zeros(3, dtype=np.int64)     # smaller than one spread job: must grow

    orig_pool = simulator.ClusterSimulator._pool_machines

    def counting(self, slot, machines):
        if self._mpool_end + len(machines) > len(self._mpool):
            compactions.append(len(self._mpool))
        orig_pool(self, slot, machines)

    monkeypatch.setattr(simulator.ClusterSimulator, "__init__", tiny_pool)
    monkeypatch.setattr(simulator.ClusterSimulator, "_pool_machines", counting)
    a, _ = _episode_digest("numpy", "philly-v0", "fifo+spread", 0)
    b, _ = _episode_digest("numba", "philly-v0", "fifo+spread", 0)
    assert len(compactions) >= 3      # filled, compacted into a new pool, filled again
    assert a == b


@pytest.mark.parametrize("rate", [0.0, 0.02])
def test_fluctuation_kernels_agree(rate):
    """OU steps and straggler switches (one or many machines at once, never-starting
    stragglers) give the same factors and states with either backend."""
    params = FluctuationParams(static_sigma=0.1, sigma=0.2, theta=0.01, interval=60.0, straggler_rate=rate,
                               straggler_mean_duration=30.0, straggler_slowdown=0.5)
    runs = []
    for backend in ("numpy", "numba"):
        with kernels.use(backend) as k:
            proc = FluctuationProcess(40, params, np.random.default_rng(7), k)
        if rate == 0.0:
            proc.set_state(straggling=np.arange(40) % 3 == 0)
        seen = []
        for dt in [1.0, 5.0, 0.5, 200.0, 60.0, 3000.0, 2.0] * 20:
            seen.append(proc.advance(dt).copy())
            seen.append(proc.straggling.copy())
        runs.append(np.concatenate([np.asarray(x, dtype=np.float64) for x in seen]))
    assert np.array_equal(runs[0], runs[1])


def test_kernel_backend_choice_and_errors():
    assert kernels.backend() in kernels.BACKENDS
    assert "numpy" in kernels.available()
    with kernels.use("numpy"):
        assert kernels.backend() == "numpy"
        env = cluster_env.parallel_env("toy-v0")
        env.reset(seed=0)
        assert env.sim._k.name == "numpy" and env.builder._kernel is None
    with pytest.raises(ValueError, match="unknown kernel backend 'fortran'"):
        with kernels.use("fortran"):
            pass


def _python(code: str, **env) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, **env})


def test_environment_variable_selects_backend_and_rejects_typos():
    code = "from cluster_env.core import kernels; print(kernels.backend())"
    assert _python(code, CLUSTER_ENV_KERNELS="numpy").stdout.strip() == "numpy"
    assert _python(code, CLUSTER_ENV_KERNELS="numba").stdout.strip() == "numba"
    bad = _python(code, CLUSTER_ENV_KERNELS="cython")
    assert bad.returncode != 0 and "CLUSTER_ENV_KERNELS must be one of" in bad.stderr


def test_without_numba_the_numpy_kernels_run():
    """numba is optional at run time: when it cannot be imported, the numpy reference is used."""
    code = ("import sys; sys.modules['numba'] = None\n"
            "import cluster_env\n"
            "from cluster_env.core import kernels\n"
            "env = cluster_env.parallel_env('toy-v0'); obs, _ = env.reset(seed=0)\n"
            "while env.agents:\n"
            "    obs, *_ = env.step({a: int(o['action_mask'].argmax()) for a, o in obs.items()})\n"
            "print(kernels.backend(), kernels.available(), env.sim.done)")
    out = _python(code)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["numpy", "('numpy',)", "True"]


_SPECIALISATIONS = """
import json, sys
import numpy as np
sys.path.insert(0, {bench!r})
from episode_digests import digest
from cluster_env.core import kernels
assert kernels.warm_up() > 0
k = kernels.active()
assert k.name == "numba", "numba is a dependency: the compiled kernels should be active here"
digest("openb-v0", "tiresias+fastest", 0, preemption=True, restart_overhead=30.0, backend="python")
digest("philly-v0", "sjf", 1, clairvoyant=True, fluctuation=False, backend="python")
# Arguments of other Python / numpy types than the defaults' (validated, then coerced).
for backend in ("python", "auto"):
    digest("philly-v0", "tiresias", 2, jobs_per_episode=200, clairvoyant=1, preemption=np.bool_(True),
           contention_alpha=1, scheduling_tick=600, restart_overhead=30, measurement_noise=0, backend=backend)
print(json.dumps({{name: len(getattr(k, name).signatures) for name in vars(k) if name != "name"}}))
"""


def test_warm_up_loads_one_specialisation_per_kernel():
    """Every kernel is compiled for one set of argument types: the warm-up loads them, and
    episodes of other scenarios and options reuse them (a second specialisation would mean a
    hidden compile of a few seconds in the middle of an episode). Counted in a fresh process:
    the compiled vector step and engine of other tests compile their own inlined variants."""
    import json

    bench = str(Path(__file__).resolve().parent.parent / "benchmarks")
    run = _python(_SPECIALISATIONS.format(bench=bench))
    assert run.returncode == 0, run.stderr[-2000:]
    counts = json.loads(run.stdout.strip().splitlines()[-1])
    # observe has a second specialisation where this process compiles the compiled step (a cold
    # cache): the step passes rows of its buffers (layout "A") where the builder passes fresh arrays.
    assert counts.pop("observe") in (1, 2)
    assert max(counts.values()) == 1, counts
    # measurable_count runs only when a measurement falls inside a restart overhead; run_to_next's
    # parts are compiled into it, run_to_next into event and refresh_rates / measure into
    # measure_rates, and when those load from the disk cache the parts need no copy of their own
    # unless called directly; the OU step and the switch detection run as one call
    # (ou_switch_due), switch_due alone only for stragglers without OU noise.
    parts = {"measurable_count", "refresh_rates", "next_finish", "accrue_due", "run_to_next", "measure",
             "ou_step", "switch_due"}
    assert all(c == 1 for name, c in counts.items() if name not in parts), counts
