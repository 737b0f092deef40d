"""The Random Walk GP of the placement agent: exactness, incremental updates, behaviour, real envs."""
from __future__ import annotations

import math

import numpy as np
import pytest

import baselines
import cluster_env
from baselines.obs import M as COL
from cluster_env.envs.observation import MACHINE_FEATURES
from dual_agent.paper.rwgp import (RandomWalkGP, RWGPConfig, kernel_factor, normalised_laplacian,
                             random_walk_kernel, similarity_graph)


# ---------------------------------------------------------------------------------- helpers
def make_machines(types: list[int], speeds: dict[int, float]) -> np.ndarray:
    """An (M, 11) machines block with the static columns set and nothing measured."""
    m = np.zeros((len(types), len(MACHINE_FEATURES)), dtype=np.float32)
    n_types = max(types) + 1
    m[:, COL["gpu_type"]] = np.array(types) / max(1, n_types - 1)
    m[:, COL["type_speed"]] = [speeds[t] for t in types]
    m[:, COL["measured_speed"]] = 1.0
    m[:, COL["measured_age_log"]] = -1.0
    return m


def measure(machines: np.ndarray, idx, value, age_seconds) -> None:
    machines[idx, COL["measured_speed"]] = value
    machines[idx, COL["measured_age_log"]] = np.log1p(age_seconds)


def scaled_kernel(machines: np.ndarray, cfg: RWGPConfig) -> np.ndarray:
    """K from the same graph by explicit matrix powers, scaled to mean diagonal prior_var."""
    w = similarity_graph(machines[:, COL["gpu_type"]].astype(np.float64),
                         machines[:, COL["type_speed"]].astype(np.float64), cfg.speed_bandwidth, cfg.neighbours)
    k = random_walk_kernel(normalised_laplacian(w), cfg.steps, cfg.a)
    return k * (cfg.prior_var / np.mean(np.diag(k)))


def dense_gp(k: np.ndarray, machines: np.ndarray, cfg: RWGPConfig, ages: np.ndarray | None = None):
    """Textbook GP posterior: mean = mu + K_xO (K_OO + D)^-1 (y - mu), var = diag(K - K_xO (.)^-1 K_Ox)."""
    age_log = machines[:, COL["measured_age_log"]].astype(np.float64)
    obs = np.flatnonzero(age_log >= 0)
    if ages is None:
        ages = np.expm1(np.maximum(age_log, 0.0))
    y = machines[obs, COL["measured_speed"]].astype(np.float64) - cfg.prior_mean
    noise = cfg.noise_var * (1.0 + ages[obs] / cfg.staleness_seconds)
    kxo = k[:, obs]
    gram = k[np.ix_(obs, obs)] + np.diag(noise)
    mean = cfg.prior_mean + kxo @ np.linalg.solve(gram, y)
    var = np.diag(k) - np.einsum("ij,ji->i", kxo, np.linalg.solve(gram, kxo.T))
    return mean, np.sqrt(var)


THREE_TYPES = {0: 1.0, 1: 0.95, 2: 0.43}


def random_cluster(rng: np.random.Generator, m: int) -> np.ndarray:
    return make_machines(sorted(rng.integers(0, 3, size=m).tolist()), THREE_TYPES)


# ---------------------------------------------------------------------------------- exactness
@pytest.mark.parametrize("steps,a", [(3, 2.0), (1, 2.5), (4, 3.0)])
def test_exact_when_m_below_rank_equals_dense_gp(steps: int, a: float) -> None:
    rng = np.random.default_rng(steps)
    cfg = RWGPConfig(steps=steps, a=a, rank=64, neighbours=2)
    machines = random_cluster(rng, 30)
    obs = rng.choice(30, size=12, replace=False)
    measure(machines, obs, rng.uniform(0.6, 1.2, size=12), rng.uniform(0, 5000, size=12))
    gp = RandomWalkGP(cfg)
    gp.reset(machines)
    assert gp.factor.exact
    np.testing.assert_array_equal(gp.posterior()[0], np.float32(cfg.prior_mean))    # before any update
    gp.update(machines)
    mean, std = gp.posterior()
    ref_mean, ref_std = dense_gp(scaled_kernel(machines, cfg), machines, cfg)
    np.testing.assert_allclose(mean, ref_mean, atol=1e-5)
    np.testing.assert_allclose(std, ref_std, atol=1e-5)


def test_low_rank_is_exact_gp_of_low_rank_plus_diagonal_kernel() -> None:
    """M > rank: the posterior is the dense GP of phi phi^T + diag(residual), whose diagonal is K's."""
    rng = np.random.default_rng(1)
    cfg = RWGPConfig(rank=6, neighbours=3)
    machines = random_cluster(rng, 40)
    gp = RandomWalkGP(cfg)
    gp.reset(machines)
    phi, res = gp.factor.phi, gp.factor.residual
    assert phi.shape == (40, 6) and not gp.factor.exact and (res >= 0).all()
    np.testing.assert_allclose(np.einsum("ij,ij->i", phi, phi) + res, np.diag(scaled_kernel(machines, cfg)),
                               atol=1e-12)
    obs = rng.choice(40, size=15, replace=False)
    measure(machines, obs, rng.uniform(0.6, 1.2, size=15), rng.uniform(0, 5000, size=15))
    mean, std = gp.features(machines).T
    ref_mean, ref_std = dense_gp(phi @ phi.T + np.diag(res), machines, cfg)
    np.testing.assert_allclose(mean, ref_mean, atol=1e-5)
    np.testing.assert_allclose(std, ref_std, atol=1e-5)


# ---------------------------------------------------------------------------------- incremental
def _drive(cfg: RWGPConfig, seed: int, rounds: int = 40):
    """Random measurement changes on a moving clock; the test tracks the frozen ages itself."""
    rng = np.random.default_rng(seed)
    machines = random_cluster(rng, 50)
    m = len(machines)
    measured_at = np.full(m, -np.inf)
    frozen = np.zeros(m)
    last_refresh, now = 0.0, 0.0
    gp = RandomWalkGP(cfg)
    gp.reset(machines)
    for _ in range(rounds):
        now += float(rng.choice([0.0, 30.0, 300.0]))
        k = int(rng.choice([1, 2, 5, 30]))            # both the incremental and the rebuild paths
        idx = rng.choice(m, size=k, replace=False)
        measured_at[idx] = now - rng.uniform(0, 10, size=k)
        machines[idx, COL["measured_speed"]] = rng.uniform(0.5, 1.3, size=k)
        seen = np.isfinite(measured_at)
        machines[seen, COL["measured_age_log"]] = np.log1p(now - measured_at[seen])
        ages = np.expm1(machines[:, COL["measured_age_log"]].astype(np.float64))
        frozen[idx] = ages[idx]
        unchanged = seen.copy()
        unchanged[idx] = False
        if unchanged.any() and (ages[unchanged] - frozen[unchanged]).max() >= cfg.refresh_seconds:
            frozen[seen] = ages[seen]
        gp.update(machines)
        gp.posterior()
    return gp, machines, frozen


@pytest.mark.parametrize("rank,refresh", [(64, 1e9), (8, 1e9), (8, 600.0)])
def test_incremental_updates_equal_from_scratch(rank: int, refresh: float) -> None:
    cfg = RWGPConfig(rank=rank, refresh_seconds=refresh, staleness_seconds=100.0)
    gp, machines, frozen = _drive(cfg, seed=rank)
    mean, std = gp.posterior()
    a, b = gp._a.copy(), gp._b.copy()
    gp._rebuild()                                      # the in-class from-scratch path
    np.testing.assert_allclose(gp._a, a, rtol=1e-10, atol=1e-8)
    np.testing.assert_allclose(gp._b, b, rtol=1e-10, atol=1e-8)
    phi, res = gp.factor.phi, gp.factor.residual
    kernel = phi @ phi.T + np.diag(res)
    ref_mean, ref_std = dense_gp(kernel, machines, cfg, ages=frozen)   # the test's own bookkeeping
    np.testing.assert_allclose(mean, ref_mean, atol=1e-5)
    np.testing.assert_allclose(std, ref_std, atol=1e-5)


def test_stale_ages_are_refreshed_after_refresh_seconds() -> None:
    cfg = RWGPConfig(refresh_seconds=600.0, staleness_seconds=100.0)
    machines = make_machines([0, 0, 1, 1], {0: 1.0, 1: 0.5})
    gp = RandomWalkGP(cfg)
    gp.reset(machines)
    measure(machines, [0], 0.8, 0.0)
    gp.update(machines)
    frozen = gp.posterior()
    measure(machines, [0], 0.8, 500.0)                 # the clock moved; no new reading
    gp.update(machines)
    np.testing.assert_array_equal(gp.posterior()[1], frozen[1])
    measure(machines, [0], 0.8, 700.0)                 # lag >= refresh_seconds: noise from the real age
    gp.update(machines)
    _, ref_std = dense_gp(scaled_kernel(machines, cfg), machines, cfg)
    np.testing.assert_allclose(gp.posterior()[1], ref_std, atol=1e-6)
    assert gp.posterior()[1][0] > frozen[1][0]


def test_deterministic() -> None:
    cfg = RWGPConfig(rank=8)
    one = _drive(cfg, seed=3)[0].posterior()
    two = _drive(cfg, seed=3)[0].posterior()
    np.testing.assert_array_equal(one[0], two[0])
    np.testing.assert_array_equal(one[1], two[1])


# ---------------------------------------------------------------------------------- behaviour
@pytest.mark.parametrize("rank", [64, 4])
def test_borrows_from_similar_machines(rank: int) -> None:
    cfg = RWGPConfig(rank=rank)
    types = [0] * 6 + [1] * 6 + [2] * 6
    machines = make_machines(types, {0: 1.0, 1: 0.95, 2: 0.43})
    gp = RandomWalkGP(cfg)
    gp.reset(machines)
    mean, std = gp.posterior()
    np.testing.assert_array_equal(mean, np.float32(cfg.prior_mean))          # nothing measured
    measure(machines, [0], 0.6, 0.0)                                        # machine 0 (type 0) is slow
    mean, std = gp.features(machines).T
    same, similar, dissimilar = mean[1], mean[6], mean[12]
    assert same < cfg.prior_mean
    assert same < similar < cfg.prior_mean and similar < dissimilar <= cfg.prior_mean + 1e-6
    assert std[0] < std[1:].min()
    assert mean[0] < same                                                   # its own reading counts most


def test_old_readings_count_less() -> None:
    machines = make_machines([0] * 4, {0: 1.0})
    fresh, old = machines.copy(), machines.copy()
    measure(fresh, [0], 0.6, 0.0)
    measure(old, [0], 0.6, 36000.0)
    out = []
    for m in (fresh, old):
        gp = RandomWalkGP()
        gp.reset(m)
        out.append(gp.features(m))
    assert out[0][0, 0] < out[1][0, 0] < 1.0 and out[0][0, 1] < out[1][0, 1]


# ---------------------------------------------------------------------------------- kernel
def test_graph_and_kernel_on_a_hand_built_cluster() -> None:
    """Two machines of type 0, one of type 1; one cross link each: a triangle with weights 1, w, w."""
    cfg = RWGPConfig(steps=2, a=2.0, neighbours=1, speed_bandwidth=0.5)
    machines = make_machines([0, 0, 1], {0: 1.0, 1: 0.5})
    w = similarity_graph(machines[:, 0].astype(np.float64), machines[:, 1].astype(np.float64), 0.5, 1)
    c = math.exp(-math.log(2.0) / 0.5)                                      # = 0.25
    np.testing.assert_allclose(w, [[0, 1, c], [1, 0, c], [c, c, 0]], atol=1e-7)
    lap = normalised_laplacian(w)
    d = np.array([1 + c, 1 + c, 2 * c])
    hand_lap = np.eye(3) - w / np.sqrt(np.outer(d, d))
    np.testing.assert_allclose(lap, hand_lap, atol=1e-12)
    b = 2.0 * np.eye(3) - hand_lap
    np.testing.assert_allclose(random_walk_kernel(lap, 2, 2.0), b @ b, atol=1e-12)
    factor = kernel_factor(lap, 2, 2.0, cfg.prior_var, rank=64)
    scale = cfg.prior_var / np.mean(np.diag(b @ b))
    np.testing.assert_allclose(factor.phi @ factor.phi.T, scale * (b @ b), atol=1e-12)


def test_isolated_machine_and_single_machine() -> None:
    lap = normalised_laplacian(np.zeros((1, 1)))
    assert lap[0, 0] == 0.0                                                 # Chung's convention
    gp = RandomWalkGP(RWGPConfig(neighbours=0))
    machines = make_machines([0, 1, 1], {0: 1.0, 1: 0.5})
    gp.reset(machines)
    mean, std = gp.features(machines).T
    assert np.isfinite(mean).all() and np.isfinite(std).all() and (std > 0).all()


def test_kernel_is_symmetric_psd_on_a_real_cluster() -> None:
    env = cluster_env.parallel_env("openb-v0", split="test")
    obs, _ = env.reset(seed=0)
    cfg = RWGPConfig()
    k = scaled_kernel(obs["placer"]["machines"], cfg)
    np.testing.assert_allclose(k, k.T, atol=1e-12)
    assert np.linalg.eigvalsh(k).min() > -1e-12
    assert np.mean(np.diag(k)) == pytest.approx(cfg.prior_var)


# ---------------------------------------------------------------------------------- real envs
@pytest.mark.parametrize("scenario,machines", [("philly-v0", 34), ("openb-full-v0", 1213)])
def test_real_environment(scenario: str, machines: int) -> None:
    assert scenario in cluster_env.list_scenarios()
    env = cluster_env.parallel_env(scenario, split="test")
    policy = baselines.make_policy("fifo")
    policy.reset(0)
    obs, infos = env.reset(seed=0)
    gp = RandomWalkGP()
    gp.reset(obs["placer"]["machines"])
    factor = gp.factor
    gp.reset(obs["orderer"]["machines"])
    assert gp.factor is factor                                              # cached by static columns
    for _ in range(12):
        feats = gp.features(obs["placer"]["machines"])
        assert feats.shape == (machines, 2) and feats.dtype == np.float32
        assert np.isfinite(feats).all() and (feats[:, 1] > 0).all()
        mean, std = gp.posterior()
        assert mean.shape == std.shape == (machines,) and mean.dtype == std.dtype == np.float32
        obs, _, _, _, infos = env.step(policy.act(obs, infos))
    assert factor.phi.shape == (machines, min(machines, RWGPConfig().rank))


# ---------------------------------------------------------------------------------- misuse
@pytest.mark.parametrize("field,value", [
    ("steps", 0), ("steps", 1.5), ("steps", True), ("a", 1.9), ("a", math.nan),
    ("speed_bandwidth", 0.0), ("neighbours", -1), ("rank", 0), ("prior_mean", math.inf),
    ("prior_var", 0.0), ("noise_var", -0.01), ("staleness_seconds", 0.0), ("refresh_seconds", math.nan),
    ("prior_var", "0.05"),
])
def test_bad_config_names_the_field(field: str, value: object) -> None:
    with pytest.raises(ValueError, match=field):
        RWGPConfig(**{field: value})


def test_misuse() -> None:
    gp = RandomWalkGP()
    machines = make_machines([0, 1], {0: 1.0, 1: 0.5})
    with pytest.raises(RuntimeError):
        gp.update(machines)
    with pytest.raises(ValueError, match="shape"):
        gp.reset(machines[:, :5])
    gp.reset(machines)
    with pytest.raises(ValueError, match="rows"):
        gp.update(np.concatenate([machines, machines]))
    with pytest.raises(ValueError, match="config"):
        RandomWalkGP(config={"rank": 3})
