"""Shared test helpers: masked random actions, episode loops through the public API, and
running the examples as a student would, loading a script of benchmarks/ or examples/ as a module."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
#: One thread for torch and BLAS: two processes with default threads crawl on two cores.
ONE_THREAD_ENV = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def run_example(script: str, *args: str, timeout: float = 120) -> str:
    """Run ``examples/<script>`` with ``args`` from the repository root; its stdout (it must exit 0)."""
    out = subprocess.run([sys.executable, str(ROOT / "examples" / script), *args], capture_output=True, text=True,
                         env=ONE_THREAD_ENV, cwd=ROOT, timeout=timeout)
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


def load_script(relative: str, name: "str | None" = None):
    """The script ``ROOT/relative`` (e.g. ``benchmarks/headroom.py``) loaded as a module named
    ``name`` (default: its stem), registered in ``sys.modules`` before it runs, since a dataclass
    of the script looks its module up there."""
    import importlib.util

    path = ROOT / relative
    spec = importlib.util.spec_from_file_location(name or path.stem, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def random_actions(obs: dict, rng: np.random.Generator, lazy: float = 0.0) -> dict:
    """A uniformly random allowed action for every agent.

    With probability ``lazy`` an agent takes its last action (advance / no-op) when allowed, so
    that random preempting policies still move the clock forward in tests.
    """
    out = {}
    for agent, o in obs.items():
        mask = o["action_mask"]
        if lazy and mask[-1] and rng.random() < lazy:
            out[agent] = len(mask) - 1
        else:
            out[agent] = int(rng.choice(np.flatnonzero(mask)))
    return out


def first_allowed_actions(obs: dict) -> dict:
    """FIFO + first-fit through the masks alone: the lowest allowed index for every agent.

    In ORDER the lowest allowed index is the oldest fitting pending job (or advance); in PLACE it
    is the lowest-numbered machine with a usable free GPU.
    """
    return {agent: int(np.flatnonzero(o["action_mask"])[0]) for agent, o in obs.items()}


def run_episode(env, policy, seed: int = 0, max_steps: int = 1_000_000, on_step=None):
    """Run one episode; returns (total reward, steps, final infos)."""
    obs, infos = env.reset(seed=seed)
    total, steps = 0.0, 0
    while env.agents:
        actions = policy(obs)
        obs, rewards, terms, truncs, infos = env.step(actions)
        total += rewards["orderer"]
        steps += 1
        if on_step is not None:
            on_step(env, obs, rewards, terms, truncs, infos)
        if steps >= max_steps:
            raise AssertionError("episode did not end")
    return total, steps, infos


#: Python code that makes the packages of every extra unimportable (torch, the SB3 packages,
#: SuperSuit, Ray), as in the base install: prepend it to a ``python -c`` program (the pytest
#: process has torch loaded). Forked worker processes inherit it.
BLOCK_TORCH = """
import sys
class _NoExtras:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("torch", "stable_baselines3", "sb3_contrib", "supersuit", "ray"):
            raise ModuleNotFoundError(f"No module named {name!r}")
sys.meta_path.insert(0, _NoExtras())
"""


def run_base_install(code: str, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """Run ``code`` (``sys.argv[1:]`` = ``args``) in a fresh interpreter as on the base install
    (:data:`BLOCK_TORCH`), from the repository root; the completed process."""
    return subprocess.run([sys.executable, "-c", BLOCK_TORCH + code, *args], capture_output=True, text=True,
                          env=ONE_THREAD_ENV, cwd=ROOT, timeout=timeout)


def run_python(code: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """Run ``python -c code`` from the repository root with one thread; the completed process."""
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=ONE_THREAD_ENV,
                          cwd=ROOT, timeout=timeout)


def place_phase_obs(free: list, speed: list, need: int, duration: float = 3600.0, *, gpus: "int | None" = None,
                    comm: float = 0.0, used: int = 0, capacity: "int | None" = None) -> dict:
    """A hand-built PLACE-phase observation (clairvoyant): free GPUs and the job's speed on each
    machine (measured speed 1), the job's remaining need and duration; optionally its GPU count,
    comm intensity, machines already held and the machines' capacity (columns left 0 otherwise)."""
    from baselines.obs import G, J, M, P

    machines = np.zeros((len(free), len(M)), dtype=np.float32)
    if capacity is not None:
        machines[:, M["gpus"]] = capacity / 8.0
    machines[:, M["free_gpus"]] = np.array(free) / 8.0
    machines[:, M["job_speed"]] = speed
    machines[:, M["measured_speed"]] = 1.0
    placing = np.zeros(len(P), dtype=np.float32)
    if gpus is not None:
        placing[P["gpus_log2"]] = np.log2(gpus)
    placing[P["need_log2"]] = np.log2(1 + need)
    placing[P["comm_intensity"]] = comm
    placing[P["machines_used"]] = used
    placing[P["duration_log"]] = np.log1p(duration)
    g = np.zeros(len(G), dtype=np.float32)
    g[G["phase"]] = g[G["clairvoyant"]] = 1
    mask = np.array([f > 0 for f in free] + [0], dtype=np.int8)
    return {"jobs": np.zeros((1, len(J)), np.float32), "machines": machines, "global": g,
            "placing": placing, "action_mask": mask}


def policy_steps(scenario: str, observation: str, seed: int, policy: str, split: str = "test", **env_kwargs):
    """Yield (env, obs, infos) at every step of one episode of ``scenario`` played by the named
    ``policy`` under the ``observation`` layout (``env_kwargs``: the environment's overrides)."""
    import cluster_env
    import baselines

    env = cluster_env.parallel_env(scenario, split=split, observation=observation, **env_kwargs)
    pol = baselines.make_policy(policy)
    obs, infos = env.reset(seed=seed)
    pol.reset(seed)
    while env.agents:
        yield env, obs, infos
        obs, _, _, _, infos = env.step(pol.act(obs, infos))


class StopsAtSeed1:
    """FIFO whose episode of seed 1 stops: ``error`` is raised there (Ctrl-C as the serial backend
    gets it, by default). Subclasses set ``name`` and ``error``; the CLI loads them as ``module:Class``."""

    name = "fifo-stops"
    error: type = KeyboardInterrupt

    def __init__(self) -> None:
        import baselines

        self.inner, self.seed = baselines.make_policy("fifo"), None

    def reset(self, seed=None):
        self.seed = seed
        self.inner.reset(seed)

    def act(self, observations, infos):
        if self.seed == 1:
            raise self.error("stopped at seed 1")
        return self.inner.act(observations, infos)


def make_workload(submit, duration, gpus):
    """A hand-built :class:`~cluster_env.core.instance.Workload` of one job type and one tenant."""
    from cluster_env.core.instance import Workload

    n = len(submit)
    return Workload(name="w", job_ids=tuple(f"j{i}" for i in range(n)), submit=np.array(submit, float),
                    duration=np.array(duration, float), gpus=np.array(gpus, dtype=np.int64),
                    job_type=np.zeros(n, dtype=np.int64), tenant=np.zeros(n, dtype=np.int64))
