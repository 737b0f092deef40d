"""Fluctuation process: exact transitions, stationarity, seeding; calibration to the PAI data.

Calibration tolerances (also in cluster_env/world/calibration.py): the simulated statistic is
within +-15 % (relative) of the PAI value for the median CoV, the fraction of iterations with
CoV > 0.5 and the median CoV among them, and within +-0.1 (absolute) for the fraction of jobs that
never show such an iteration.  At the default simulation size the seed-to-seed standard deviation
of these statistics is about 1 %, 4 %, 0.7 % and 0.02 respectively.
"""
import dataclasses
import gzip
import hashlib
import math

import numpy as np
import pytest

from cluster_env.world.calibration import (
    PAI_DATA_DIR, cov_of_single_straggler, pai_targets, simulate_worker_statistics,
)
from cluster_env.world.fluctuation import (
    DEFAULT_FLUCTUATION, NO_FLUCTUATION, STATIC_FACTOR_BOUNDS, FluctuationParams,
    FluctuationProcess, draw_static_factors,
)

P = DEFAULT_FLUCTUATION


def rng(seed):
    return np.random.default_rng(seed)


# ----------------------------------------------------------------------------------- data
def test_packaged_pai_files_are_the_originals():
    expected = {
        "coefficient_variation.csv.gz":
            "81a96c3e5cec9d5caff5df10cfd971ef79556319b0ce436e2eed6d08ae417fc4",
        "job_1_norm.csv.gz": "6f555e44ababa68c25659f911eb28fa7658f7ff0b3c08161a57b3bce0bf0d2dd",
        "job_4_norm.csv.gz": "eccd5b23e4480e585082ba4affecbcc240150a9dcfc69b237d4dcb28ad146bc6",
    }
    for name, sha in expected.items():
        assert hashlib.sha256(gzip.open(PAI_DATA_DIR / name).read()).hexdigest() == sha


def test_pai_targets_values():
    t = pai_targets()
    assert t["n_jobs"] == 100 and len(t["window_lengths"]) == 100
    assert min(t["window_lengths"]) >= 200 and max(t["window_lengths"]) <= 1999
    assert t["median_cov"] == pytest.approx(0.0935, abs=5e-4)
    assert t["mean_cov"] == pytest.approx(0.3736, abs=5e-4)
    assert t["frac_cov_above"] == pytest.approx(0.2639, abs=5e-4)
    assert t["median_cov_when_above"] == pytest.approx(0.908, abs=1e-3)
    assert t["frac_jobs_never_above"] == pytest.approx(0.54)
    assert t["per_job_frac_slow"][4] > 0.3 and t["per_job_frac_slow"][2] == 0.0
    assert 50 < t["correlation_time_iterations"] < 120
    assert 0 < t["dynamic_std_log"] < t["static_std_log"] < 0.1
    t["median_cov"] = -1.0                      # a fresh dict each call
    assert pai_targets()["median_cov"] > 0


def test_single_straggler_cov():
    assert cov_of_single_straggler(1.0) == 0.0
    # 0.5 <=> one worker about 2.85x slower; the default slowdown gives about the data's severity.
    assert cov_of_single_straggler(2.85) == pytest.approx(0.5, abs=0.01)
    assert cov_of_single_straggler(1 / P.straggler_slowdown) == pytest.approx(
        pai_targets()["median_cov_when_above"], rel=0.02)


# ---------------------------------------------------------------------------- calibration
@pytest.fixture(scope="module")
def simulated():
    return simulate_worker_statistics(P, rng=rng(2024))


@pytest.mark.parametrize("key", ["median_cov", "frac_cov_above", "median_cov_when_above"])
def test_calibrated_statistics_within_15_percent(simulated, key):
    target = pai_targets()[key]
    assert simulated[key] == pytest.approx(target, rel=0.15), (key, simulated[key], target)


def test_persistence_within_tolerance(simulated):
    assert simulated["frac_jobs_never_above"] == pytest.approx(
        pai_targets()["frac_jobs_never_above"], abs=0.1)


def test_calibration_is_sensitive_to_the_parameters():
    # The statistics move with the parameters they calibrate (the test above is not vacuous).
    base = simulate_worker_statistics(P, rng=rng(5), n_jobs=300)
    calm = simulate_worker_statistics(dataclasses.replace(P, static_sigma=0.03, sigma=0.02),
                                      rng=rng(5), n_jobs=300)
    assert calm["median_cov"] < 0.7 * base["median_cov"]
    rare = simulate_worker_statistics(dataclasses.replace(P, straggler_rate=P.straggler_rate / 4),
                                      rng=rng(5), n_jobs=300)
    assert rare["frac_cov_above"] < 0.6 * base["frac_cov_above"]
    mild = simulate_worker_statistics(dataclasses.replace(P, straggler_slowdown=0.3),
                                      rng=rng(5), n_jobs=300)
    assert mild["median_cov_when_above"] < 0.85 * base["median_cov_when_above"]


def test_simulation_reproducible():
    a = simulate_worker_statistics(P, rng=rng(9), n_jobs=50, n_iterations=300)
    b = simulate_worker_statistics(P, rng=rng(9), n_jobs=50, n_iterations=300)
    assert a == b


# ------------------------------------------------------------------------------ static
def test_static_factors():
    f = draw_static_factors(200_000, 0.2, rng(1))
    assert f.shape == (200_000,) and f.dtype == np.float64
    assert f.min() >= STATIC_FACTOR_BOUNDS[0] and f.max() <= STATIC_FACTOR_BOUNDS[1]
    assert f.mean() == pytest.approx(1.0, abs=0.005)
    assert np.log(f).std() == pytest.approx(0.2, rel=0.05)
    assert np.array_equal(draw_static_factors(10, 0.0, rng(1)), np.ones(10))
    assert np.array_equal(draw_static_factors(50, 0.1, rng(3)), draw_static_factors(50, 0.1, rng(3)))
    assert draw_static_factors(0, 0.1, rng(3)).shape == (0,)
    big = draw_static_factors(10_000, 2.0, rng(4))
    assert big.min() == 0.5 and big.max() == 1.5          # clipped
    with pytest.raises(ValueError):
        draw_static_factors(3, -0.1, rng(0))


# ------------------------------------------------------------------------------ process
def test_all_off_gives_ones():
    params = dataclasses.replace(P, sigma=0.0, straggler_rate=0.0)
    p = FluctuationProcess(100, params, rng(0))
    assert np.array_equal(p.factors, np.ones(100))
    for dt in (0.0, 1.0, 60.0, 1e7):
        assert np.array_equal(p.advance(dt), np.ones(100))
    assert not p.straggling.any()
    q = FluctuationProcess(7, NO_FLUCTUATION, rng(0))
    assert np.array_equal(q.advance(123.0), np.ones(7))


def test_advance_updates_in_place_and_returns_factors():
    p = FluctuationProcess(20, P, rng(0))
    arr = p.factors
    out = p.advance(60.0)
    assert out is arr and p.factors is arr
    before = arr.copy()
    assert np.array_equal(p.advance(0.0), before)            # dt = 0: nothing moves
    with pytest.raises(ValueError):
        p.advance(-1.0)
    with pytest.raises(ValueError):
        p.advance(float("nan"))


def test_same_seed_same_factors_other_seed_different():
    def run(seed):
        p = FluctuationProcess(50, P, rng(seed))
        for dt in [60.0] * 30 + [5000.0, 0.5, 60.0]:
            p.advance(dt)
        return p.factors.copy(), p.straggling.copy()
    a, b, c = run(7), run(7), run(8)
    assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])
    assert not np.array_equal(a[0], c[0])


def test_only_the_given_generator_is_used():
    state = np.random.get_state()
    p = FluctuationProcess(30, P, rng(0))
    for _ in range(10):
        p.advance(60.0)
    draw_static_factors(30, 0.1, rng(1))
    after = np.random.get_state()
    assert state[0] == after[0] and np.array_equal(state[1], after[1]) and state[2:] == after[2:]


def test_stationary_mean_and_std_of_ou_term():
    params = dataclasses.replace(P, sigma=0.1, theta=0.01, straggler_rate=0.0)
    p = FluctuationProcess(20_000, params, rng(11))
    # Start far from equilibrium; after many correlation times the law is stationary.
    p.set_state(log_speed=0.8)
    for _ in range(100):
        p.advance(60.0)                                    # 6,000 s = 60 correlation times
    assert p.log_speed.mean() == pytest.approx(0.0, abs=0.004)
    assert p.log_speed.std() == pytest.approx(0.1, rel=0.03)
    assert p.factors.mean() == pytest.approx(1.0, abs=0.004)   # OU term has mean 1
    # Time average of one machine over a long run.
    q = FluctuationProcess(1, params, rng(12))
    xs = np.array([q.advance(100.0)[0] for _ in range(20_000)])
    assert xs.mean() == pytest.approx(1.0, abs=0.01)
    assert np.log(xs).std() == pytest.approx(0.1, rel=0.05)


def test_default_mean_factor_near_one_and_straggling_fraction():
    p = FluctuationProcess(50_000, P, rng(13))
    for _ in range(20):
        p.advance(60.0)
    pi = P.straggling_fraction
    assert p.straggling.mean() == pytest.approx(pi, abs=0.004)
    expected_mean = 1 - pi * (1 - P.straggler_slowdown)
    assert p.factors.mean() == pytest.approx(expected_mean, abs=0.004)
    assert 0.95 < p.factors.mean() <= 1.0


def _conditional(params, dt, steps, seed, x0, on0, n=100_000):
    p = FluctuationProcess(n, params, rng(seed))
    p.set_state(log_speed=x0, straggling=on0)
    for _ in range(steps):
        p.advance(dt / steps)
    return p.log_speed.copy(), p.straggling.copy()


@pytest.mark.parametrize("on0", [False, True])
def test_exact_transition_one_step_equals_ten_steps(on0):
    params = FluctuationParams(static_sigma=0.0, sigma=0.2, theta=0.01, interval=60.0,
                               straggler_rate=2e-3, straggler_mean_duration=300.0,
                               straggler_slowdown=0.3)
    dt, x0 = 150.0, 0.5
    x1, s1 = _conditional(params, dt, 1, 1, x0, on0)
    x10, s10 = _conditional(params, dt, 10, 2, x0, on0)
    # Analytic law of the exact transition.
    mean = x0 * math.exp(-params.theta * dt)
    std = params.sigma * math.sqrt(1 - math.exp(-2 * params.theta * dt))
    lam, mu = params.straggler_rate, 1 / params.straggler_mean_duration
    pi = lam / (lam + mu)
    e = math.exp(-(lam + mu) * dt)
    p_on = pi + (1 - pi) * e if on0 else pi * (1 - e)
    se_p = math.sqrt(p_on * (1 - p_on) / len(s1))
    for x, s in ((x1, s1), (x10, s10)):
        assert x.mean() == pytest.approx(mean, abs=4 * std / math.sqrt(len(x)))
        assert x.std() == pytest.approx(std, rel=0.01)
        assert s.mean() == pytest.approx(p_on, abs=5 * se_p)
    assert abs(x1.mean() - x10.mean()) < 5 * std * math.sqrt(2 / len(x1))
    assert abs(s1.mean() - s10.mean()) < 5 * se_p * math.sqrt(2)


def test_long_idle_step_returns_to_the_stationary_law():
    params = dataclasses.replace(P, straggler_rate=1e-3, straggler_mean_duration=100.0)
    p = FluctuationProcess(100_000, params, rng(3))
    p.set_state(log_speed=1.0, straggling=True)
    p.advance(1e6)                                      # many switches inside one step
    assert p.straggling.mean() == pytest.approx(params.straggling_fraction, abs=0.005)
    assert p.log_speed.std() == pytest.approx(params.sigma, rel=0.02)
    assert abs(p.log_speed.mean()) < 0.002


def test_straggler_episode_lengths_are_exponential_with_the_mean():
    params = FluctuationParams(static_sigma=0.0, sigma=0.0, theta=1.0, interval=60.0,
                               straggler_rate=1e-2, straggler_mean_duration=50.0,
                               straggler_slowdown=0.25)
    p = FluctuationProcess(2_000, params, rng(5))
    on_time = 0
    onsets = 0
    prev = p.straggling.copy()
    for _ in range(2_000):
        p.advance(1.0)
        onsets += int(np.count_nonzero(p.straggling & ~prev))
        on_time += int(np.count_nonzero(p.straggling))
        prev = p.straggling.copy()
        assert np.array_equal(p.factors[p.straggling], np.full(p.straggling.sum(), 0.25))
    # mean episode length = time spent straggling / onsets (1 s resolution)
    assert on_time / onsets == pytest.approx(50.0, rel=0.1)


def test_params_validation():
    with pytest.raises(ValueError):
        dataclasses.replace(P, sigma=-0.1)
    with pytest.raises(ValueError):
        dataclasses.replace(P, theta=0.0)
    with pytest.raises(ValueError):
        dataclasses.replace(P, straggler_slowdown=0.0)
    with pytest.raises(ValueError):
        dataclasses.replace(P, straggler_slowdown=1.5)
    with pytest.raises(ValueError):
        dataclasses.replace(P, interval=float("inf"))
    assert 0 < P.straggling_fraction < 0.1
    assert 0 < P.straggler_slowdown < 1 and P.interval == 300.0
