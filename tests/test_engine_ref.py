"""The compiled engine's state passed by reference (cluster_env.core.engine.ref) and its
engine-local next-event search: what the loops rely on beyond the whole-episode comparisons of
tests/test_compiled_engine.py and tests/test_vector.py."""
from __future__ import annotations

import numpy as np
import pytest

from cluster_env.core import kernels

pytestmark = pytest.mark.skipif(kernels.backend() != "numba", reason="the compiled engine needs numba")


def _fresh_state(scenario: str = "toy-v0"):
    import cluster_env
    from cluster_env.core.engine.state import build_state

    from cluster_env.core.simulator import ClusterSimulator

    env = cluster_env.parallel_env(scenario, split="test")

    rng = np.random.default_rng(0)
    workload = env.scenario.sample(env.split, rng, env.jobs_per_episode)
    sim = ClusterSimulator(env.cluster, workload, env.world, rng, preemption=env.sched.preemption,
                           scheduling_tick=env.sched.scheduling_tick, time_limit=env.sched.max_time)
    return build_state(env, sim)


def test_state_items_are_the_built_state_types():
    """The vector step reads states from byte images typed by STATE_ITEMS / OBS_ITEMS: they must
    be the types build_state and the backend's observation tuple really have."""
    import numba

    from cluster_env.vector import ClusterVectorEnv
    from cluster_env.core.engine import step

    assert numba.typeof(_fresh_state()) == step.STATE_TYPE
    vec = ClusterVectorEnv(2, "philly-v0", backend="compiled", jobs_per_episode=20)
    vec.reset(seed=0)
    assert numba.typeof(vec.backend._obs[0]) == step.OBS_TYPE
    assert numba.typeof(vec.backend._states[1]) == step.STATE_TYPE


def test_ref_reads_and_writes_the_callers_arrays():
    import numba

    from cluster_env.core.engine import ref

    @numba.njit
    def bump(S):
        a, b = S[0], S[1]
        a[1] += 1.0
        b[0, 1] = 7
        return a.sum() + S[-1][0, 1]

    @numba.njit
    def through_stash(S):
        return bump(ref.stash(S))

    S = (np.arange(3.0), np.zeros((2, 2), dtype=np.int64))
    assert through_stash(S) == 4.0 + 7            # 0 + 2 + 2, then the int item written through
    assert S[0].tolist() == [0.0, 2.0, 2.0] and S[1][0, 1] == 7

    store, load = ref.image_access(numba.typeof(S))

    @numba.njit
    def keep(image, S):
        store(image, S)

    @numba.njit
    def through_image(image):
        return bump(load(image))

    image = np.zeros(ref.image_size(numba.typeof(S)), dtype=np.uint8)
    keep(image, S)
    assert through_image(image) == 5.0 + 7
    assert S[0][1] == 3.0


def test_image_store_rejects_another_tuple_type():
    """An image is read with one fixed type: storing a tuple of another type is a typing error,
    not memory read with the wrong layout."""
    import numba

    from cluster_env.core.engine import ref

    S = (np.zeros(3), np.zeros((2, 2), dtype=np.int64))
    store, _ = ref.image_access(numba.typeof(S))

    @numba.njit
    def keep(image, S):
        store(image, S)

    image = np.zeros(ref.image_size(numba.typeof(S)), dtype=np.uint8)
    with pytest.raises(numba.core.errors.TypingError):
        keep(image, (np.zeros(3), np.zeros((2, 2))))


@pytest.mark.parametrize("restarting", [False, True])
@pytest.mark.parametrize("dirty", [False, True])
def test_run_running_is_the_kernels_run_to_next(restarting, dirty):
    """The engine's next-event step over its slot rows gives the kernel's values and writes the
    same remaining work and due slots, NaN and infinite finishes included."""

    from cluster_env.core.engine import layout as L
    from cluster_env.core.engine import sim

    run_to_next = kernels._load("numba").run_to_next
    rng = np.random.default_rng(3 + restarting + 2 * dirty)
    base = _fresh_state("toy-v0")
    cap = base[7].shape[1]
    m = base[2].shape[1]
    for trial in range(150):
        S = tuple(a.copy() for a in base)
        sf, si, mf, ic, pf = S[7], S[8], S[2], S[11], S[12]
        n = int(rng.integers(1, cap + 1))
        now = float(rng.uniform(0.0, 1e5))
        sf[L.S_LEFT, :n] = rng.exponential(1e3, n) * (rng.random(n) < 0.9)
        sf[L.S_RATE, :n] = rng.uniform(0.1, 2.0, n)
        sf[L.S_NOMINAL, :n] = rng.uniform(0.5, 2.0, n)
        sf[L.S_ACOMM, :n] = rng.uniform(0.0, 0.3, n)
        sf[L.S_UNTIL, :n] = now + rng.uniform(-50.0, 50.0, n)
        si[L.S_FM, :n] = rng.integers(0, m, n)
        si[L.S_MLEN, :n] = 1
        mf[L.FACTOR] = rng.uniform(0.5, 1.5, m)
        mf[L.CROWD] = rng.integers(0, 3, m)
        pf[L.ALPHA] = 0.2
        if trial % 7 == 0:
            sf[L.S_RATE, rng.integers(n)] = 0.0                 # an infinite (or 0 / 0: NaN) finish
        if trial % 11 == 0:
            sf[L.S_LEFT, rng.integers(n)] = np.nan
        if trial % 5 == 0:
            sf[L.S_LEFT, rng.integers(n)] = 0.0                 # due now
        ic[L.N_RUN], ic[L.N_MULTI] = n, 0
        ic[L.RESTARTING], ic[L.DIRTY] = int(restarting), int(dirty)
        t_other = now + float(rng.exponential(500.0))
        left, rate = sf[L.S_LEFT].copy(), sf[L.S_RATE].copy()
        due = np.zeros(cap, dtype=np.int64)
        empty = np.zeros(0, dtype=np.int64)
        want = run_to_next(n, dirty, si[L.S_FM], mf[L.FACTOR], mf[L.CROWD], sf[L.S_NOMINAL], sf[L.S_ACOMM], rate,
                           pf[L.ALPHA], empty, empty, empty, left, sf[L.S_UNTIL], now, restarting, t_other,
                           np.zeros(cap), due)
        got = sim.run_running(S, now, t_other)
        assert got[2:] == want[2:]
        for g, w in zip(got[:2], want[:2]):
            assert g == w or (np.isnan(g) and np.isnan(w))
        np.testing.assert_array_equal(sf[L.S_LEFT, :n], left[:n])
        np.testing.assert_array_equal(sf[L.S_RATE, :n], rate[:n])
        np.testing.assert_array_equal(S[20][:want[3]], due[:want[3]])
