"""Stragglers at width: the DEDICATED_FLUCTUATION preset against published large-job figures.

Source: GREYHOUND (Wu et al., USENIX ATC'25, section 3, Table 1, Figure 1; arXiv 2410.12588
"FALCON"): jobs of 512-1,024 GPUs on 64-128 whole 8-GPU machines, 16 of 27 met fail-slows that
delayed them by 34.59 % on average (20 % of them by more than 50 %), mean fail-slow 72 min;
single-machine probes: 6 of 392, +11.79 %.  Tolerances (also in cluster_env/world/calibration.py):
mean delay over all 96-machine jobs +-15 % (fitted); share of jobs that meet a straggler +-0.10
absolute and mean delay among them +-25 % (jobs of ASSUMED_LARGE_JOB_HOURS = 5 h, an assumption);
share of those delayed by more than 50 % in [0.10, 0.30] (0.20 read off 16 jobs); mean delay at
one machine within 2x of 0.18 %.  At 400 jobs the seed-to-seed standard deviation of the first
three is about 0.013, 0.02 and 0.02.
"""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import cluster_env.world as world
from cluster_env.core.config import WorldConfig
from cluster_env.core.instance import Cluster, Workload
from cluster_env.core.simulator import ClusterSimulator
from cluster_env.world.calibration import (
    ASSUMED_LARGE_JOB_HOURS, expected_delay_at_width, large_job_targets, simulate_job_slowdown,
    straggling_fraction_at_width,
)
from cluster_env.world.fluctuation import (
    DEDICATED_FLUCTUATION, DEFAULT_FLUCTUATION, NO_FLUCTUATION, FluctuationParams,
)
from cluster_env.world.throughputs import JOB_TYPES

D = DEDICATED_FLUCTUATION
LARGE = 96                    # the middle of GREYHOUND's 64-128 machines


def test_targets_are_the_greyhound_table():
    t = large_job_targets()
    by = t["by_width"]
    assert (by[1]["jobs"], by[1]["affected"], by[1]["mean_delay_affected"]) == (392, 6, 0.1179)
    assert (by[4]["jobs"], by[4]["affected"], by[4]["mean_delay_affected"]) == (107, 43, 0.1545)
    assert (by[96]["jobs"], by[96]["affected"], by[96]["mean_delay_affected"]) == (27, 16, 0.3459)
    assert by[96]["mean_delay"] == pytest.approx(16 / 27 * 0.3459)
    assert by[96]["mean_episode_s"] == 72 * 60 and by[1]["mean_episode_s"] == 600
    assert t["frac_affected_above_half"] == 0.20 and t["large_machines"] == (64, 128)
    assert t["assumed_job_hours"] == ASSUMED_LARGE_JOB_HOURS
    t["by_width"][96]["jobs"] = -1                          # a fresh dict each call
    assert large_job_targets()["by_width"][96]["jobs"] == 27


def test_preset_is_opt_in_and_exported():
    assert WorldConfig().fluctuation_params is DEFAULT_FLUCTUATION
    assert world.DEDICATED_FLUCTUATION is D
    assert {"large_job_targets", "simulate_job_slowdown", "expected_delay_at_width"} <= set(world.__all__)
    WorldConfig(fluctuation_params=D).validate()
    # The preset's sourced parts (see its comment): severity and episode length from GREYHOUND.
    assert D.straggler_slowdown == 0.2
    assert D.straggler_mean_duration == large_job_targets()["by_width"][96]["mean_episode_s"]


@pytest.fixture(scope="module")
def large():
    return simulate_job_slowdown(D, LARGE, ASSUMED_LARGE_JOB_HOURS * 3600, n_jobs=400,
                                 rng=np.random.default_rng(2024))


def test_large_jobs_match_greyhound(large):
    target = large_job_targets()
    g = target["by_width"][96]
    assert large["mean_delay"] == pytest.approx(g["mean_delay"], rel=0.15), large
    assert large["frac_affected"] == pytest.approx(g["frac_affected"], abs=0.10), large
    assert large["mean_delay_affected"] == pytest.approx(g["mean_delay_affected"], rel=0.25), large
    assert 0.10 <= large["frac_affected_above_half"] <= 0.30, large


def test_pai_defaults_do_not_fit_large_jobs():
    """Why the preset exists: PAI's shared-GPU stragglers, extrapolated to 96 machines, delay a
    job ~3x on average (published: 0.2x)."""
    g = large_job_targets()["by_width"][96]["mean_delay"]
    assert expected_delay_at_width(DEFAULT_FLUCTUATION, LARGE) > 10 * g
    pai = simulate_job_slowdown(DEFAULT_FLUCTUATION, LARGE, 5 * 3600, n_jobs=30, rng=np.random.default_rng(0))
    assert pai["mean_delay"] > 10 * g and pai["frac_affected"] == 1.0


def test_width_dependence_one_and_four_machines():
    by = large_job_targets()["by_width"]
    # One machine (not fitted): GREYHOUND's 80-min single-node probes, mean delay 0.18 %.
    one = simulate_job_slowdown(D, 1, 80 * 60, n_jobs=20_000, rng=np.random.default_rng(5))
    assert by[1]["mean_delay"] / 2 <= one["mean_delay"] <= 2 * by[1]["mean_delay"], one
    # Four machines: the documented gap. GREYHOUND's 4-node probes held 2 GPUs on each of 4
    # shared machines and shared links with other tenants (6.2 % mean delay); the dedicated
    # model gives about 1.4 %.
    four = simulate_job_slowdown(D, 4, 5 * 3600, n_jobs=2_000, rng=np.random.default_rng(5))
    assert four["mean_delay"] < 0.5 * by[4]["mean_delay"]
    # The delay grows with width, as the published figures do.
    delays = [expected_delay_at_width(D, m) for m in (1, 4, 8, 64, 96, 128)]
    assert all(a < b for a, b in zip(delays, delays[1:]))


def test_expected_delay_formula_and_long_run_simulation_agree():
    p = dataclasses.replace(D, sigma=0.0, straggler_rate=2e-5, straggler_mean_duration=1800.0,
                            straggler_slowdown=0.5)
    q = straggling_fraction_at_width(p, 4)
    pi = p.straggling_fraction
    assert q == pytest.approx(1 - (1 - pi) ** 4)
    assert expected_delay_at_width(p, 4) == pytest.approx(1 / (1 - q * 0.5) - 1)
    # Jobs much longer than an episode: the mean delay approaches the stationary value.
    sim = simulate_job_slowdown(p, 4, 500 * 3600, n_jobs=60, step=1800.0, rng=np.random.default_rng(3))
    assert sim["mean_delay"] == pytest.approx(expected_delay_at_width(p, 4), rel=0.1)


def test_simulate_job_slowdown_is_seeded_and_checks_arguments():
    a = simulate_job_slowdown(D, 8, 3600.0, n_jobs=50, rng=np.random.default_rng(1))
    b = simulate_job_slowdown(D, 8, 3600.0, n_jobs=50, rng=np.random.default_rng(1))
    assert np.array_equal(a["delays"], b["delays"])
    none = simulate_job_slowdown(NO_FLUCTUATION, 8, 3600.0, n_jobs=5)
    assert none["mean_delay"] == 0.0 and none["frac_affected"] == 0.0
    with pytest.raises(ValueError, match="n_machines"):
        simulate_job_slowdown(D, 0, 3600.0)
    with pytest.raises(ValueError, match="duration"):
        simulate_job_slowdown(D, 8, float("nan"))
    with pytest.raises(ValueError, match="step"):
        simulate_job_slowdown(D, 8, 3600.0, step=0.0)
    with pytest.raises(ValueError, match="n_machines"):
        straggling_fraction_at_width(D, 0)


# ----------------------------------------------------------- the reproduction (docs/world_model.md)
RESNET = JOB_TYPES.index("ResNet-50 (batch size 64)")
MACHINES, DURATION = 64, 3600.0
#: Today's behaviour with the PAI defaults: 4,067-18,648 s over seeds 0-9.
PAI_JCT = [18293, 18436, 15299, 18618, 6717, 15185, 4067, 18648, 12482, 18389]


def _jct(params: FluctuationParams, seed: int) -> float:
    """One 512-GPU ResNet-50 job of 3,600 s on 64 x 8 A100, only fluctuation on."""
    cfg = dataclasses.replace(WorldConfig(reference_gpu="A100").all_effects_off(), fluctuation=True,
                              fluctuation_params=params)
    cluster = Cluster.from_machines("w", [(f"m{i}", "A100", 8) for i in range(MACHINES)])
    jobs = Workload(name="w", job_ids=("j",), submit=np.zeros(1), duration=np.array([DURATION]),
                    gpus=np.array([8 * MACHINES]), job_type=np.array([RESNET]),
                    tenant=np.zeros(1, dtype=np.int64))
    sim = ClusterSimulator(cluster, jobs, cfg, np.random.default_rng(seed))
    sim.start(0)
    for m in range(MACHINES):
        sim.place(m)
    while not sim.done:
        sim.advance()
    return float(sim.jobs.finish[0])


def test_512_gpu_job_reproduction():
    """Documented range under DEDICATED_FLUCTUATION (docs/world_model.md, "Stragglers at width"):
    the median JCT within 5 % of 3,600 s (the OU jitter of the slowest of 64 machines costs
    ~1.5 %); at most 3 of 10 seeds above 1.5x (the model: ~12 % of 1-h 64-machine jobs; GREYHOUND:
    0.20 x 16/27 = 12 % of large jobs delayed by more than 50 %); none above 3,600 / 0.2 s x 1.05
    (a straggler for the whole run).  The PAI defaults keep today's behaviour bit for bit."""
    new = [_jct(D, s) for s in range(10)]
    assert DURATION <= float(np.median(new)) <= 1.05 * DURATION, new
    assert sum(j > 1.5 * DURATION for j in new) <= 3, new
    assert max(new) <= DURATION / D.straggler_slowdown * 1.05, new
    old = [round(_jct(DEFAULT_FLUCTUATION, s)) for s in range(10)]
    assert old == PAI_JCT
    assert sum(j > 1.5 * DURATION for j in old) >= 8


def test_compiled_engine_agrees_under_the_preset():
    """The preset changes parameters only, not the process: the compiled baselines engine and the
    API path give the same records with it (as with the defaults, tests/test_compiled_engine.py)."""
    from baselines import engine
    from baselines.harness.episode import run_episode
    from baselines.registry import make_policy

    if not engine.available():
        pytest.skip("the compiled engine needs numba kernels")
    # The preset has a few straggler onsets on 27 machines over this window (~4 expected); the
    # same preset with 20x the onset rate has ~80, so the switch path surely runs.
    for params in (D, dataclasses.replace(D, straggler_rate=20 * D.straggler_rate)):
        kw = {"jobs_per_episode": 80, "fluctuation_params": params}
        for policy in ("las+fastest", "fifo"):
            api = run_episode(make_policy(policy), "philly-hetero-v1", "test", 2, kw).record
            compiled = engine.run_compiled_episode(policy, "philly-hetero-v1", "test", 2, kw)
            assert compiled.engine == "compiled"
            diff = {k: (v, compiled.record[k]) for k, v in api.items()
                    if k != "wall_s" and v != compiled.record[k]}
            assert not diff, (params, policy, diff)
    preset = run_episode(make_policy("fifo"), "philly-hetero-v1", "test", 2,
                         {"jobs_per_episode": 80, "fluctuation_params": D}).record
    default = run_episode(make_policy("fifo"), "philly-hetero-v1", "test", 2, {"jobs_per_episode": 80}).record
    assert default["avg_jct"] != preset["avg_jct"]          # the preset reached the world
