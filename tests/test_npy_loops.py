"""numpy's exp loop called directly by the compiled engine (cluster_env.core.engine.npy_loops):
numpy's bits exactly, on many lengths and values, through ctypes and through numba; the objmode
fallback when the loop is disabled or fails its self-check."""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from cluster_env.core import kernels
from cluster_env.core.engine import npy_loops

needs_api = pytest.mark.skipif(not hasattr(np.exp, "_get_strided_loop"), reason="numpy < 1.24: no loop access")
needs_numba = pytest.mark.skipif(kernels.backend() != "numba", reason="the compiled engine needs numba")

SPECIAL = [0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 1e308, -1e308, np.finfo(float).max, -np.finfo(float).max,
           np.finfo(float).tiny, 5e-324, -5e-324, 709.782712893384, 709.7827128933841, -708.3964185322641,
           -745.1332191019411, -745.1332191019412, 1e-300, 1e-17, -1e-17, 1.0, -1.0, 2.0 ** -1022]


def _arrays(seed: int):
    rng = np.random.default_rng(seed)
    special = np.array(SPECIAL)
    for n in list(range(1, 80)) + [127, 128, 129, 1000, 4097]:
        yield rng.normal(0.0, 3.0, n)
        yield rng.uniform(-800.0, 800.0, n)
        yield special[rng.integers(0, len(special), n)]
        yield np.where(rng.random(n) < 0.3, special[rng.integers(0, len(special), n)], rng.normal(0.0, 50.0, n))


def _bits(a: np.ndarray) -> bytes:
    return np.ascontiguousarray(a).view(np.int64).tobytes()


def _np_exp(a: np.ndarray) -> np.ndarray:
    out = a.copy()
    with np.errstate(all="ignore"):
        np.exp(out, out=out)
    return out


@needs_api
def test_exp_loop_found_and_self_checked():
    loop = npy_loops.exp_loop()
    assert all(loop[:2]) and npy_loops.reason is None, npy_loops.reason


@needs_api
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_loop_equals_np_exp_bit_for_bit(seed):
    loop = npy_loops.exp_loop()
    assert loop[0], npy_loops.reason
    count = 0
    for a in _arrays(seed):
        got = a.copy()
        npy_loops.call_inplace(loop, got)
        assert _bits(got) == _bits(_np_exp(a)), (len(a), a[:8])
        count += 1
    assert count > 300


@needs_api
def test_specials_one_by_one():
    loop = npy_loops.exp_loop()
    for v in SPECIAL:
        got = np.array([v])
        npy_loops.call_inplace(loop, got)
        assert _bits(got) == _bits(_np_exp(np.array([v]))), v
    got = np.array([np.inf, -np.inf, np.nan, 1e308, -1e308])
    npy_loops.call_inplace(loop, got)
    assert got[0] == np.inf and got[1] == 0.0 and np.isnan(got[2]) and got[3] == np.inf and got[4] == 0.0


@needs_api
@needs_numba
@pytest.mark.parametrize("disabled", [False, True])
def test_engine_exp_through_numba_equals_np_exp(disabled):
    """sim.np_exp_inplace as the engine calls it: numpy's loop from the parameters, or objmode."""
    import numba

    from cluster_env.core.engine import layout as L
    from cluster_env.core.engine import sim

    @numba.njit
    def exp_rows(block, count, pi):
        for r in range(block.shape[0]):
            sim.np_exp_inplace(block[r][:count], pi)

    pi = np.zeros(L.PI_SIZE, dtype=np.int64)
    if not disabled:
        pi[L.EXP_LOOP], pi[L.EXP_CTX], pi[L.EXP_AUX] = npy_loops.exp_loop()
        assert pi[L.EXP_LOOP] != 0
    for a in _arrays(5):
        block = np.stack([a, a[::-1].copy()])
        want = np.stack([_np_exp(a), _np_exp(a[::-1].copy())])
        with np.errstate(all="ignore"):       # objmode: numpy's overflow warning
            exp_rows(block, len(a), pi)
        assert _bits(block) == _bits(want), len(a)
    # Only the first ``count`` entries change (the loop gets the slice's length).
    block = np.full((1, 10), 2.0)
    exp_rows(block, 3, pi)
    assert _bits(block[0, 3:]) == _bits(np.full(7, 2.0))


@needs_api
def test_mismatching_loop_falls_back(monkeypatch):
    """A loop that is not numpy's exp (here numpy's sin) fails the self-check: zeros, with a reason."""
    real = npy_loops._loop_of
    monkeypatch.setattr(npy_loops, "_loop_of", lambda ufunc: real(np.sin))
    npy_loops.exp_loop.cache_clear()
    try:
        assert npy_loops.exp_loop() == (0, 0, 0)
        assert "differs" in npy_loops.reason
    finally:
        monkeypatch.undo()
        npy_loops.exp_loop.cache_clear()
    assert npy_loops.exp_loop()[0] != 0


def test_missing_api_falls_back(monkeypatch):
    def broken(ufunc):
        raise AttributeError("no _get_strided_loop")

    monkeypatch.setattr(npy_loops, "_loop_of", broken)
    npy_loops.exp_loop.cache_clear()
    try:
        assert npy_loops.exp_loop() == (0, 0, 0)
        assert "unavailable" in npy_loops.reason
    finally:
        monkeypatch.undo()
        npy_loops.exp_loop.cache_clear()


def test_disabled_by_environment_variable():
    code = ("from cluster_env.core.engine import npy_loops as n\n"
            "print(n.exp_loop(), n.reason)\n")
    env = dict(os.environ, CLUSTER_ENV_NPY_LOOPS="0")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "(0, 0, 0) disabled by CLUSTER_ENV_NPY_LOOPS"


@needs_numba
def test_vector_episodes_same_with_the_objmode_fallback():
    """The compiled vector env's episodes with numpy's loop and with the objmode fallback (the
    loop's address zeroed in every env's parameters) are the same, bit for bit."""
    from cluster_env.core.engine import layout as L
    from cluster_env.vector import ClusterVectorEnv

    def run(fallback: bool) -> list[bytes]:
        vec = ClusterVectorEnv(3, "philly-v0", backend="compiled", jobs_per_episode=30, preemption=True)
        obs, _ = vec.reset(seed=7)

        def zero():
            for state in vec.backend._states:
                state[13][L.EXP_LOOP] = 0
                assert state[13][L.EXP_CTX] != 0 or not npy_loops.exp_loop()[1]

        if fallback:
            zero()
        rng = np.random.default_rng(3)
        out = []
        for _ in range(400):
            mask = obs["action_mask"]
            actions = np.array([rng.choice(np.flatnonzero(m)) for m in mask], dtype=np.int64)
            obs, rew, term, trunc, info = vec.step(actions)
            if fallback and (term | trunc).any():
                zero()                 # the auto-reset built fresh states
            out.append(b"".join(np.ascontiguousarray(x).tobytes() for x in
                                (obs["jobs"], obs["machines"], obs["global"], obs["action_mask"], rew, info["time"])))
        vec.close()
        return out

    with_loop, fallback = run(False), run(True)
    assert len(with_loop) == len(fallback)
    for t, (a, b) in enumerate(zip(with_loop, fallback)):
        assert a == b, f"step {t}"
