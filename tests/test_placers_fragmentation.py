"""The speed-aware placers (``fastest``, ``clairvoyant``) do not spread a job over more machines than
consolidation would use unless the expected speed gain exceeds the noise margin
(``baselines.placers.SPREAD_MARGIN``).

The reproduction: 3 x 8 A100, static machine factors and the spread penalty on (every
other effect off), jobs of 8, 8 and 7 GPUs (600 s) and a 1-GPU job (100,000 s) at t=0, then a
16-GPU ``LM (batch size 5)`` job (3,600 s) at t=1,000. The 16 free GPUs then sit 8 + 8 + 7 (the
1-GPU job holds the eighth GPU of one machine); two machines hold the job. The old ``fastest``
took the measured-fastest machine first, 7 free GPUs when it was the one with the long job, and
so spread the job over three machines (Gavel's spread penalty: the LM job's JCT grew from about
3,970 s to 37,900 s; average JCT 26.5k / 25.4k / 28.4k s on seeds 0, 4, 5 against 20.2k / 18.9k /
21.6k s with ``consolidate``). Expected now: the same average JCT as ``consolidate`` within 1%
(the placers agree on these windows exactly; 1% leaves room for a tie broken on another machine
of equal free GPUs).
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

import baselines
from baselines import engine
from baselines.harness.episode import run_episode
from baselines.obs import M, P
from baselines.placers import SPREAD_MARGIN, FastestFirst, OraclePlacer, split_choice, speed_and_fit
from cluster_env.core.config import SchedulingConfig, WorldConfig
from cluster_env.core.instance import Cluster, LoadReport, Workload
from tests.helpers import place_phase_obs
from cluster_env.scenarios.base import Scenario
from cluster_env.world import JOB_TYPES

SAME_AS_CONSOLIDATE_REL = 0.01
SEEDS = (0, 4, 5)


def _scenario(name: str, machines: list, jobs: list, reference: str) -> Scenario:
    """``jobs``: (submit s, duration s, GPUs, job type name); static factors and spread penalty on."""
    n = len(jobs)
    workload = Workload(
        name=name, job_ids=tuple(f"j{i}" for i in range(n)),
        submit=np.array([j[0] for j in jobs], dtype=np.float64), duration=np.array([j[1] for j in jobs], dtype=np.float64),
        gpus=np.array([j[2] for j in jobs], dtype=np.int64),
        job_type=np.array([JOB_TYPES.index(j[3]) for j in jobs], dtype=np.int64),
        tenant=np.zeros(n, dtype=np.int64), report=LoadReport(source="test", rows_read=n, rows_kept=n))
    cluster = Cluster.from_machines(name, machines)
    whole = {s: (0.0, 1.0) for s in ("train", "validation", "test")}
    world = dataclasses.replace(WorldConfig(reference_gpu=reference).all_effects_off(), static_factors=True,
                                spread_penalty=True)
    return Scenario(name=name, description="placer fragmentation case", cluster=lambda: cluster,
                    workload=lambda: workload, splits=whole, world=world, scheduling=SchedulingConfig())


def fragmentation_scenario() -> Scenario:
    """The reproduction (module docstring)."""
    other = JOB_TYPES[0]
    jobs = [(0, 600, 8, other), (0, 600, 8, other), (0, 600, 7, other), (0, 100_000, 1, other),
            (1000, 3600, 16, "LM (batch size 5)")]
    return _scenario("fragmentation", [(f"m{i}", "A100", 8) for i in range(3)], jobs, "A100")


def fast_fragmented_scenario() -> Scenario:
    """4 x 8 V100 + 2 x 8 K80: four 5-GPU jobs take one V100 each (3 GPUs left on each), then a
    12-GPU ResNet-50 job (no communication penalty: comm_intensity 0, Gavel's ratios 1 at 8 GPUs) either
    consolidates on the two K80s or spreads over the four V100s, 3.8x faster per GPU: the guard
    lets it spread."""
    jobs = [(0, 50_000, 5, JOB_TYPES[0])] * 4 + [(10, 3600, 12, "ResNet-50 (batch size 64)")]
    machines = [(f"v{i}", "V100", 8) for i in range(4)] + [(f"k{i}", "K80", 8) for i in range(2)]
    return _scenario("fast-fragmented", machines, jobs, "V100")


def _avg_jct(policy: str, scenario: Scenario, seed: int) -> float:
    return run_episode(baselines.make_policy(policy), scenario, "test", seed).record["avg_jct"]


@pytest.mark.parametrize("policy", ["fifo+fastest", "las+fastest", "las+clairvoyant"])
def test_speed_aware_placers_do_not_fragment_the_reproduction(policy):
    scenario = fragmentation_scenario()
    for seed in SEEDS:
        consolidated = _avg_jct(policy.split("+")[0] + "+consolidate", scenario, seed)
        assert _avg_jct(policy, scenario, seed) == pytest.approx(consolidated, rel=SAME_AS_CONSOLIDATE_REL), seed


def test_fastest_spreads_over_faster_machines_when_the_gain_is_large():
    scenario = fast_fragmented_scenario()
    result = run_episode(baselines.make_policy("fifo+fastest"), scenario, "test", 0, record=True)
    wide = result.jct[-1]
    consolidated = run_episode(baselines.make_policy("fifo+consolidate"), scenario, "test", 0, record=True).jct[-1]
    # Four V100s at 3.8x a K80's speed (no spread penalty for this type): several times faster
    # than two K80s.
    assert wide < consolidated / 2


@pytest.mark.skipif(not engine.available(), reason="the compiled engine needs numba kernels")
@pytest.mark.parametrize("policy", ["fifo+fastest", "las+fastest", "las+clairvoyant", "srpt-clairvoyant"])
def test_compiled_engine_places_the_cases_as_the_api(policy):
    for scenario in (fragmentation_scenario(), fast_fragmented_scenario()):
        for seed in (0, 4):
            api = run_episode(baselines.make_policy(policy), scenario, "test", seed).record
            compiled = engine.run_compiled_episode(policy, scenario, "test", seed).record
            diff = {k: (api[k], compiled[k]) for k in api
                    if k != "wall_s" and api[k] != compiled[k]
                    and not (isinstance(api[k], float) and math.isnan(api[k]) and math.isnan(compiled[k]))}
            assert not diff, (policy, scenario.name, seed, diff)


# ------------------------------------------------------------------ decisions on built observations
def place_obs(free: list, speed: list, need: int, gpus: int, comm: float, capacity: int = 8, used: int = 0,
              duration: float = 3600.0) -> dict:
    """A PLACE-phase observation: free GPUs and the job's speed per machine (measured speed 1),
    machines of ``capacity`` GPUs; the job's GPUs, remaining need, comm intensity, machines held."""
    return place_phase_obs(free, speed, need, duration, gpus=gpus, comm=comm, used=used, capacity=capacity)


def test_fastest_still_prefers_a_faster_gpu_type_when_the_job_fits_whole():
    # Machine 0 is slow and fits the 4 GPUs tightly; machines 1 and 2 are 2.5x faster with room.
    obs = place_obs([4, 8, 6], [0.4, 1.0, 1.0], need=4, gpus=4, comm=0.3)
    assert FastestFirst().place(obs, {}) == 2          # the faster type, then the tighter fit
    # A faster machine that would split the job loses to one that holds it whole.
    obs = place_obs([4, 3, 3], [0.4, 1.0, 1.0], need=4, gpus=4, comm=0.3)
    assert FastestFirst().place(obs, {}) == 0


def test_a_split_job_keeps_to_the_fewest_machines_despite_a_faster_one():
    # 16 GPUs on 8-GPU machines: 8 + 8 (machines 0, 1) is the fewest. Machine 2 is measured 10%
    # faster (noise) but has 7 free: the old rule took it first and ended on three machines.
    obs = place_obs([8, 8, 7], [1.0, 1.0, 1.1], need=16, gpus=16, comm=0.45)
    for placer in (FastestFirst(), OraclePlacer()):
        assert placer.place(obs, {}) in (0, 1)
    # After 8 GPUs on machine 0 (one machine held), 8 are left: machine 1 holds them whole.
    obs = place_obs([8, 7], [1.0, 1.1], need=8, gpus=16, comm=0.45, used=1)
    assert FastestFirst().place(obs, {}) == 0


@pytest.mark.parametrize("fast, spreads", [(0.33, False), (0.825, False), (0.9, True), (1.0, True)])
def test_a_wider_placement_must_beat_consolidation_by_the_margin(fast, spreads):
    # Four fast machines with 4 free (16 GPUs over four machines, beyond the fewest two: the job
    # pays the ratio the placer assumes, 1 - 3 x 0.2 = 0.4) against two slow ones (speed 0.3) with
    # 8 free (two machines, no penalty). Expected speeds 0.4 x fast against 0.3: gains 0.44,
    # 1.10, 1.20 and 1.33; the margin is SPREAD_MARGIN = 15%.
    obs = place_obs([4, 4, 4, 4, 8, 8], [fast] * 4 + [0.3, 0.3], need=16, gpus=16, comm=0.2)
    pick = FastestFirst().place(obs, {})
    assert (pick < 4) == spreads, (fast, pick, 0.4 * fast / 0.3)
    # With no margin any faster placement spreads; with an infinite one nothing does.
    assert (FastestFirst(spread_margin=0.0).place(obs, {}) < 4) == (0.4 * fast > 0.3)
    assert FastestFirst(spread_margin=math.inf).place(obs, {}) >= 4


def test_the_margin_is_the_documented_default():
    assert FastestFirst().spread_margin == SPREAD_MARGIN == 0.15
    with pytest.raises(ValueError, match="spread_margin"):
        FastestFirst(spread_margin=-0.1)


def _brute_force_choice(obs, ok, speed, free, tolerance, margin):
    """split_choice's placement by enumerating speed levels with plain loops (no histogram)."""
    need = int(round(2.0 ** float(obs["placing"][P["need_log2"]]) - 1.0))
    n = len(ok)
    if free.sum() < need:
        return set(range(n))
    by_speed = sorted(range(n), key=lambda i: (-speed[i], ok[i]))
    capacity = sorted((int(round(c * 8)) for c in obs["machines"][:, M["gpus"]]), reverse=True)
    gpus = int(round(2.0 ** float(obs["placing"][P["gpus_log2"]])))
    fewest = next((c + 1 for c in range(len(capacity)) if sum(capacity[:c + 1]) >= gpus), len(capacity))
    used = int(round(float(obs["placing"][P["machines_used"]])))
    ratio = max(0.0, 1.0 - 3.0 * float(obs["placing"][P["comm_intensity"]]))
    plans = []
    for p in range(1, n + 1):
        members = sorted(by_speed[:p], key=lambda i: (-free[i], -speed[i], ok[i]))
        held, chosen = 0, []
        for i in members:
            if held >= need:
                break
            chosen.append(i)
            held += free[i]
        if held < need or (plans and len(chosen) >= len(plans[-1][0])):
            continue
        slow = min(speed[i] for i in chosen)
        plans.append((chosen, slow * ratio if used + len(chosen) > fewest else slow))
    best = max(e for _, e in plans)
    chosen, expected = plans[-1]
    if best > expected * (1.0 + margin):
        chosen = [c for c, e in plans if e >= best * (1.0 - tolerance)][-1]
    return set(chosen)


def test_split_choice_matches_a_brute_force_enumeration():
    rng = np.random.default_rng(7)
    checked = 0
    for _ in range(300):
        m = int(rng.integers(2, 9))
        free = [int(x) for x in rng.integers(0, 9, m)]
        if max(free) == 0:
            continue
        speed = [float(x) for x in rng.choice([0.3, 0.5, 1.0, 1.05, 1.2], m)]
        need = int(rng.integers(max(free) + 1, max(free) + 20))
        obs = place_obs(free, speed, need=need, gpus=need + int(rng.integers(0, 8)), comm=float(rng.uniform(0, 0.3)),
                        used=int(rng.integers(0, 3)))
        ok = obs["action_mask"][:-1].nonzero()[0]
        sp, fr, whole, _ = speed_and_fit(obs, ok)
        assert not whole.any()
        mask = split_choice(obs, ok, sp, fr, 0.02, SPREAD_MARGIN)
        assert set(mask.nonzero()[0]) == _brute_force_choice(obs, ok, sp, fr, 0.02, SPREAD_MARGIN)
        checked += 1
    assert checked > 200
