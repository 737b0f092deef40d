"""The opt-in extended observation (observation="extended"): append-only, in its spaces, never
reads the future, a tenant encoding that is stable across windows."""
from __future__ import annotations

import math

import numpy as np
import pytest
from pettingzoo.test import parallel_api_test

import cluster_env
from cluster_env.envs.observation import GLOBAL_FEATURES, JOB_FEATURES
from cluster_env.envs.observation_ext import (EXTRA_GLOBAL_FEATURES, EXTRA_JOB_FEATURES, RECENT_WEIGHT,
                                              TENANT_SLOTS)
from tests.helpers import policy_steps

N_JOB, N_GLOB = len(JOB_FEATURES), len(GLOBAL_FEATURES)
COL = {name: N_JOB + i for i, name in enumerate(EXTRA_JOB_FEATURES)}
GCOL = {name: N_GLOB + i for i, name in enumerate(EXTRA_GLOBAL_FEATURES)}


def _episode(observation: str, seed: int = 3, policy: str = "las", **kw):
    """Yield (env, obs, infos) at every step of one short philly-v1 episode played by ``policy``."""
    return policy_steps("philly-v1", observation, seed, policy, split="train", jobs_per_episode=120,
                        preemption=True, **kw)


def test_default_layout_is_unchanged_and_extended_only_appends_columns():
    default = list(_episode("default"))
    extended = list(_episode("extended"))
    assert len(default) == len(extended) > 100
    assert default[0][1]["orderer"]["jobs"].shape[1] == N_JOB
    assert default[0][1]["orderer"]["global"].shape == (N_GLOB,)
    for (_, a, _), (_, b, _) in zip(default, extended):
        for agent in ("orderer", "placer"):
            np.testing.assert_array_equal(a[agent]["jobs"], b[agent]["jobs"][:, :N_JOB])
            np.testing.assert_array_equal(a[agent]["global"], b[agent]["global"][:N_GLOB])
            np.testing.assert_array_equal(a[agent]["action_mask"], b[agent]["action_mask"])


def test_extended_observations_lie_in_their_spaces_which_are_the_same_objects():
    for env, obs, _ in _episode("extended", seed=5):
        for agent in ("orderer", "placer"):
            assert env.observation_space(agent) is env.observation_space(agent)
            assert env.observation_space(agent).contains(obs[agent])
    assert env.observation_space("orderer")["jobs"].shape[1] == N_JOB + len(EXTRA_JOB_FEATURES)


def _stats_from_scratch(sim, tenant: int) -> tuple[int, float, float]:
    """(count, mean, moving average) of log1p(run time) of ``tenant``'s jobs finished by now."""
    finish = sim.jobs.finish
    done = np.flatnonzero(~np.isnan(finish) & (finish <= sim.now) & (sim.workload.tenant == tenant))
    done = done[np.lexsort((done, finish[done]))]
    values = np.log1p(sim.jobs.executed[done])
    if not len(values):
        return 0, -1.0, -1.0
    recent = values[0]
    for v in values[1:]:
        recent = (1 - RECENT_WEIGHT) * recent + RECENT_WEIGHT * v
    return len(values), float(values.mean()), float(recent)


def test_tenant_statistics_read_only_jobs_finished_before_now():
    checked = 0
    for env, obs, infos in _episode("extended", seed=7):
        sim = env.unwrapped.sim
        # Nothing that has not finished may have been counted: the durations of running and
        # pending jobs are hidden, and so is every finish after now.
        assert not (sim.jobs.finish > sim.now).any()
        jobs, ids = obs["orderer"]["jobs"], infos["orderer"]["job_ids"]
        for row in np.flatnonzero(ids >= 0)[:6]:
            tenant = int(sim.workload.tenant[ids[row]])
            count, mean, recent = _stats_from_scratch(sim, tenant)
            assert jobs[row, COL["tenant_seen_log"]] == pytest.approx(math.log1p(count), abs=1e-5)
            assert jobs[row, COL["tenant_mean_log"]] == pytest.approx(mean, abs=1e-4)
            assert jobs[row, COL["tenant_recent_log"]] == pytest.approx(recent, abs=1e-4)
            assert jobs[row, COL["attained_all_log"]] == pytest.approx(math.log1p(sim.jobs.attained[ids[row]]),
                                                                       rel=1e-5, abs=1e-5)
            checked += count > 0
    assert checked > 50      # the statistics were non-trivial for many rows


def test_tick_phase_is_the_time_since_the_last_tick_over_the_period():
    seen = set()
    for env, obs, infos in _episode("extended", seed=2):
        sim = env.unwrapped.sim
        last = sim.last_tick if math.isfinite(sim.last_tick) else 0.0
        want = (sim.now - last) / env.unwrapped.sched.scheduling_tick
        phase = obs["orderer"]["global"][GCOL["tick_phase"]]
        assert phase == pytest.approx(want, abs=1e-5)
        assert 0.0 <= phase <= 1.0
        seen.add(round(float(phase), 1))
    assert len(seen) > 3     # the phase varies over the episode
    # Without preemption there are no ticks: -1.
    env = cluster_env.parallel_env("philly-v1", observation="extended", jobs_per_episode=30)
    obs, _ = env.reset(seed=0)
    assert obs["orderer"]["global"][GCOL["tick_phase"]] == -1.0


def test_tenant_slot_is_stable_across_windows():
    env = cluster_env.parallel_env("philly-v1", split="train", observation="extended", jobs_per_episode=200)
    reads: dict[int, set] = {}
    for seed in range(6):
        env.reset(seed=seed)
        builder = env.unwrapped.builder
        tenants = env.unwrapped.sim.workload.tenant
        for t, slot in zip(tenants.tolist(), builder._slot.tolist()):
            reads.setdefault(t, set()).add(slot)
    assert len(reads) > 3
    for t, values in reads.items():
        assert values == {np.float32((t % TENANT_SLOTS) / (TENANT_SLOTS - 1))}


def test_extended_layout_passes_the_parallel_api_test():
    parallel_api_test(cluster_env.parallel_env("toy-v0", observation="extended", preemption=True), num_cycles=200)


@pytest.mark.parametrize("bad", ["ext", 1, None])
def test_unknown_observation_layout_is_a_clear_error(bad):
    with pytest.raises(ValueError, match="observation must be one of"):
        cluster_env.parallel_env("toy-v0", observation=bad)
