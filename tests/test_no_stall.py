"""No episode can stall: the zero-time preempt/restart livelock and padded/forbidden actions."""
from __future__ import annotations

import numpy as np
import pytest

import cluster_env
from cluster_env.envs.cluster_parallel import MAX_PREEMPTIONS_PER_INSTANT

# A generous bound: the always-lowest policy preempts every running job up to
# MAX_PREEMPTIONS_PER_INSTANT times per instant (about 25,000 steps for 20 Philly jobs).
STEP_BOUND = 200_000


def _lowest_allowed(obs: dict) -> dict:
    return {a: int(np.flatnonzero(o["action_mask"])[0]) for a, o in obs.items()}


@pytest.mark.parametrize("scenario,kw", [("toy-v0", {}), ("philly-v0", {"jobs_per_episode": 20})])
@pytest.mark.parametrize("seed", [0, 1])
def test_lowest_allowed_action_with_preemption_ends(scenario, kw, seed):
    # The policy that always takes its lowest allowed action used to preempt a job, restart it and
    # preempt it again forever at one instant; the env now bounds the preemptions of a job per instant.
    env = cluster_env.parallel_env(scenario, split="test", preemption=True, **kw)
    obs, infos = env.reset(seed=seed)
    steps, same_instant, last_time, preempts_here = 0, 0, None, {}
    while env.agents:
        actions = _lowest_allowed(obs)
        t = infos["orderer"]["time"]
        if infos["orderer"]["phase"] == "order":
            k = env.builder.K
            a = actions["orderer"]
            if k <= a < env.builder.K + env.builder.R:
                job = int(infos["orderer"]["job_ids"][a])
                preempts_here[(t, job)] = preempts_here.get((t, job), 0) + 1
                assert preempts_here[(t, job)] <= MAX_PREEMPTIONS_PER_INSTANT, f"job {job} at t={t}"
        same_instant = same_instant + 1 if t == last_time else 0
        last_time = t
        obs, rewards, terms, truncs, infos = env.step(actions)
        steps += 1
        assert steps < STEP_BOUND, f"no end after {steps} steps (t={t})"
    assert terms["orderer"] and not truncs["orderer"]
    assert env.metrics()["preemptions"] > 0          # the scenario did exercise preemption


def test_migration_in_one_instant_stays_allowed():
    # The guard only bounds repeated preemptions in one instant: a job preempted once (e.g. to move
    # it) may be restarted at once and preempted again.
    env = cluster_env.parallel_env("toy-v0", split="test", preemption=True)
    obs, infos = env.reset(seed=0)
    k, r = env.builder.K, env.builder.R
    while env.agents:
        mask = obs["orderer"]["action_mask"]
        if infos["orderer"]["phase"] == "order" and mask[k:k + r].any():
            a = k + int(np.flatnonzero(mask[k:k + r])[0])
            job = int(infos["orderer"]["job_ids"][a])
            t = infos["orderer"]["time"]
            obs, _, _, _, infos = env.step({"orderer": a, "placer": len(obs["placer"]["action_mask"]) - 1})
            assert infos["orderer"]["time"] == t
            row = int(np.flatnonzero(infos["orderer"]["job_ids"] == job)[0])
            assert row < k and obs["orderer"]["action_mask"][row]        # pending again, may restart
            return
        obs, _, _, _, infos = env.step(_lowest_allowed(obs))
    pytest.fail("no preemption opportunity in the toy episode")


def test_forbidden_action_error_says_what_to_do():
    env = cluster_env.parallel_env("toy-v0", split="test")
    obs, _ = env.reset(seed=0)
    bad = int(np.flatnonzero(obs["orderer"]["action_mask"] == 0)[0])
    with pytest.raises(cluster_env.errors.InvalidActionError,
                       match=r"(?s)action_masks\(\).*MaskablePPO.*invalid_action='fallback'"):
        env.step({"orderer": bad, "placer": len(obs["placer"]["action_mask"]) - 1})


def test_padded_actions_of_the_agent_slots_count_towards_max_steps():
    from cluster_env.wrappers import AgentSlots

    slots = AgentSlots(cluster_env.parallel_env("philly-v0", jobs_per_episode=20, invalid_action="noop", max_steps=5))
    slots.reset(seed=0)
    padded = slots.n_actions - 1                      # the orderer acts first and has fewer actions
    assert padded >= slots._n[0]
    for i in range(5):
        _, _, dones, infos = slots.step([padded, padded])
        assert infos[0]["invalid_action"]
    assert dones.all() and infos[0]["TimeLimit.truncated"]
