"""The batched vector env (cluster_env.vector): the same episodes as separate parallel envs, bit for
bit, with auto-reset; seeding; invalid actions; the disabled autoreset mode; spaces."""
from __future__ import annotations

import functools

import numpy as np
import pytest

import cluster_env
from cluster_env.errors import InvalidActionError
from cluster_env.core import kernels
from cluster_env.vector import ClusterVectorEnv, PythonBackend
from cluster_env.vector.compiled import CompiledBackend

FEATS = ("jobs", "machines", "global", "placing")
# Small, fast episodes that still end several times per test: preemption exercises the running
# window, max_steps the truncation path, openb the per-job allowed GPU types.
CASES = [
    ("toy-v0", {}),
    ("philly-v0", {"jobs_per_episode": 8, "preemption": True, "max_steps": 120}),
    ("philly-v0", {"jobs_per_episode": 40, "max_steps": 60}),
    ("openb-v0", {"jobs_per_episode": 12}),
    ("philly-v1", {"jobs_per_episode": 16}),
    ("modern-v1", {"jobs_per_episode": 30, "max_steps": 150}),    # all-reduce spread model
]
# The backends compared with separate parallel envs: the Python one with the compiled observation
# kernel writing rows in place or with copies, and the compiled backend (one numba call per step).
BACKENDS = {
    "python-kernel-writes-rows": functools.partial(PythonBackend, direct=True),
    "python-copies": functools.partial(PythonBackend, direct=False),
    "compiled": "compiled",
}
needs_numba = pytest.mark.skipif(kernels.active().name != "numba", reason="the compiled backend needs numba")


def _choose(rng: np.random.Generator, mask: np.ndarray, lazy: float) -> int:
    """A random allowed action; with probability ``lazy`` the last (advance) when allowed."""
    if mask[-1] and rng.random() < lazy:
        return len(mask) - 1
    return int(rng.choice(np.flatnonzero(mask)))


def _assert_row(vobs: dict, i: int, obs: dict, phase: int) -> None:
    for k in FEATS:
        np.testing.assert_array_equal(vobs[k][i], obs["orderer"][k], err_msg=k)
        assert vobs[k][i].tobytes() == obs["orderer"][k].tobytes(), k       # bits, not just values
    np.testing.assert_array_equal(vobs["orderer_mask"][i], obs["orderer"]["action_mask"])
    np.testing.assert_array_equal(vobs["placer_mask"][i], obs["placer"]["action_mask"])
    acting = obs["placer" if phase else "orderer"]["action_mask"]
    assert vobs["phase"][i] == phase
    np.testing.assert_array_equal(vobs["action_mask"][i, : len(acting)], acting)
    assert not vobs["action_mask"][i, len(acting):].any()


@pytest.mark.parametrize("backend", list(BACKENDS))
@pytest.mark.parametrize("scenario,overrides", CASES, ids=[c[0] + str(sorted(c[1])) for c in CASES])
def test_same_episodes_as_separate_parallel_envs(scenario, overrides, backend):
    if backend == "compiled" and kernels.active().name != "numba":
        pytest.skip("the compiled backend needs numba")
    n, seed, steps = 3, 11, 400
    vec = ClusterVectorEnv(n, scenario, "train", backend=BACKENDS[backend], **overrides)
    vec.reset(seed=seed)
    if backend == "compiled":
        assert isinstance(vec.backend, CompiledBackend)
    else:
        assert vec.backend.direct == [backend.endswith("rows") and kernels.active().name == "numba"] * n
    refs = [cluster_env.parallel_env(scenario, "train", **overrides) for _ in range(n)]
    vobs, vinfos = vec.reset(seed=seed)
    robs = []
    for i, env in enumerate(refs):
        o, inf = env.reset(seed=seed + i)
        robs.append(o)
        _assert_row(vobs, i, o, env.phase)
        np.testing.assert_array_equal(vinfos["job_ids"][i], inf["orderer"]["job_ids"])
    rng = np.random.default_rng(0)
    episodes_ended = 0
    for t in range(steps):
        acting = np.array([_choose(rng, vobs["action_mask"][i], lazy=0.6) for i in range(n)])
        if t % 2:       # the dict-of-two form on odd steps (the idle agent sends its no-op)
            phase = vobs["phase"]
            actions = {"orderer": np.where(phase == 1, vec.n_order - 1, acting),
                       "placer": np.where(phase == 1, acting, vec.n_place - 1)}
        else:
            actions = acting
        vobs, vrew, vterm, vtrunc, vinfos = vec.step(actions)
        for i, env in enumerate(refs):
            agent = "placer" if env.phase == 1 else "orderer"
            other = "orderer" if agent == "placer" else "placer"
            o, r, te, tr, inf = env.step({agent: int(acting[i]), other: env.action_space(other).n - 1})
            assert vrew[i] == r["orderer"] and vterm[i] == te["orderer"] and vtrunc[i] == tr["orderer"], (t, i)
            if te["orderer"] or tr["orderer"]:
                episodes_ended += 1
                assert vinfos["_final_obs"][i] and vinfos["_final_info"][i]
                final = vinfos["final_obs"][i]
                for k in FEATS:
                    assert final[k].tobytes() == o["orderer"][k].tobytes(), k
                fin = vinfos["final_info"]
                for key, value in inf["orderer"]["metrics"].items():
                    got = fin["metrics"][key][i]
                    assert got == value or (np.isnan(got) and np.isnan(value)), key
                assert fin["offered_load"][i] == inf["orderer"]["offered_load"]
                assert fin["time"][i] == inf["orderer"]["time"]
                o, inf = env.reset()             # what same-step autoreset does: no reseeding
            elif "_final_obs" in vinfos:
                assert not vinfos["_final_obs"][i]
            _assert_row(vobs, i, o, env.phase)
            assert vinfos["time"][i] == inf["orderer"]["time"]
            assert vinfos["placing_job"][i] == inf["orderer"]["placing_job"]
            assert vinfos["tick"][i] == inf["orderer"]["tick"]
            np.testing.assert_array_equal(vinfos["job_ids"][i], inf["orderer"]["job_ids"])
    assert episodes_ended >= n        # every env auto-reset at least once on average


def test_seeding_conventions():
    base = ClusterVectorEnv(3, "philly-v0", jobs_per_episode=10)
    listed = ClusterVectorEnv(3, "philly-v0", jobs_per_episode=10)
    a, _ = base.reset(seed=5)
    a = {k: v.copy() for k, v in a.items()}           # the arrays are buffers the next reset rewrites
    b, _ = listed.reset(seed=[5, 6, 7])
    for k in FEATS:
        np.testing.assert_array_equal(a[k], b[k])
    c, _ = listed.reset(seed=[7, None, 5])        # env 1 continues its generator
    np.testing.assert_array_equal(c["jobs"][0], a["jobs"][2])
    np.testing.assert_array_equal(c["jobs"][2], a["jobs"][0])
    ref = cluster_env.parallel_env("philly-v0", jobs_per_episode=10)
    ref.reset(seed=6)
    o, _ = ref.reset()
    np.testing.assert_array_equal(c["jobs"][1], o["orderer"]["jobs"])
    with pytest.raises(TypeError, match="seed"):
        base.reset(seed=[1, 2])
    t, _ = base.reset(seed=0, options={"split": "test"})      # options reach every env
    ref_test, _ = cluster_env.parallel_env("philly-v0", jobs_per_episode=10).reset(seed=1, options={"split": "test"})
    np.testing.assert_array_equal(t["jobs"][1], ref_test["orderer"]["jobs"])
    assert not np.array_equal(t["jobs"][1], a["jobs"][1])


def test_forbidden_action_raises_before_any_env_steps():
    vec = ClusterVectorEnv(2, "toy-v0")
    obs, infos = vec.reset(seed=0)
    actions = np.argmax(obs["action_mask"], axis=1)
    bad = actions.copy()
    bad[1] = int(np.flatnonzero(obs["action_mask"][1] == 0)[0])
    with pytest.raises(InvalidActionError, match="env 1"):
        vec.step(bad)
    assert (infos["num_steps"] == 0).all()        # env 0 did not step either
    with pytest.raises(InvalidActionError, match="outside Discrete"):
        vec.step(np.full(2, vec.n_actions))
    with pytest.raises(ValueError, match="shape"):
        vec.step(np.zeros(3, dtype=np.int64))
    phase = obs["phase"]
    with pytest.raises(InvalidActionError, match="no-op"):      # the idle agent must send its no-op
        vec.step({"orderer": actions, "placer": np.where(phase == 0, 0, actions)})
    vec.step(actions)
    assert (infos["num_steps"] == 1).all()


def test_fallback_and_noop_modes():
    fb = ClusterVectorEnv(2, "toy-v0", invalid_action="fallback", invalid_penalty=0.5)
    ref = ClusterVectorEnv(2, "toy-v0")
    obs, _ = fb.reset(seed=3)
    ref.reset(seed=3)
    lowest = np.argmax(obs["action_mask"], axis=1)
    bad = np.array([lowest[0], int(np.flatnonzero(obs["action_mask"][1] == 0)[0])])
    _, r, _, _, infos = fb.step(bad)
    _, r_ref, _, _, _ = ref.step(lowest)
    assert infos["invalid_action"].tolist() == [False, True]
    assert infos["played_action"].tolist() == lowest.tolist()
    assert r[0] == r_ref[0] and r[1] == r_ref[1] - 0.5
    noop = ClusterVectorEnv(2, "toy-v0", invalid_action="noop")
    before, _ = noop.reset(seed=3)
    before = {k: v.copy() for k, v in before.items()}
    after, r, _, _, infos = noop.step(bad)
    assert infos["invalid_action"].tolist() == [False, True]
    np.testing.assert_array_equal(after["jobs"][1], before["jobs"][1])   # env 1 unchanged
    assert infos["num_steps"].tolist() == [1, 1]                         # ... but its step counts


def test_autoreset_disabled_needs_explicit_resets():
    vec = ClusterVectorEnv(2, "toy-v0", autoreset_mode="disabled")
    obs, _ = vec.reset(seed=0)
    ended = np.zeros(2, dtype=bool)
    metrics = None
    for _ in range(200):
        obs, r, te, tr, infos = vec.step(np.argmax(obs["action_mask"], axis=1))
        if (te | tr).any():
            ended, metrics = te | tr, infos
            break
    assert ended.all() and "final_obs" not in metrics and metrics["_metrics"].all()
    assert metrics["metrics"]["jobs_finished"].tolist() == [6, 6]       # toy-v0's six jobs
    with pytest.raises(RuntimeError, match="reset them first"):
        vec.step(np.argmax(obs["action_mask"], axis=1))
    obs, infos = vec.reset(options={"reset_mask": np.array([True, False])})
    assert infos["time"][0] == 0.0
    with pytest.raises(RuntimeError, match=r"env\(s\) \[1\]"):
        vec.step(np.argmax(obs["action_mask"], axis=1))
    vec.reset(options={"reset_mask": np.array([False, True])})
    vec.step(np.argmax(obs["action_mask"], axis=1))


def test_spaces_and_buffers():
    vec = ClusterVectorEnv(2, "philly-v0", jobs_per_episode=10)
    obs, _ = vec.reset(seed=0)
    assert vec.observation_space.contains(obs)
    assert obs["action_mask"].dtype == np.int8 and obs["phase"].shape == (2,)
    assert vec.single_action_space.n == max(vec.n_order, vec.n_place)
    assert vec.action_space.shape == (2,)
    # The feature arrays view the flat block, which is the flat view's layout.
    flat = vec.flat_observations()
    from cluster_env.wrappers import HeteroClusterFlatEnv

    view = HeteroClusterFlatEnv("philly-v0", jobs_per_episode=10)
    first, _ = view.reset(seed=1)
    np.testing.assert_array_equal(flat[1], first)
    obs2, *_ = vec.step(np.argmax(obs["action_mask"], axis=1))
    assert obs2["jobs"] is obs["jobs"]                                   # no copy per step
    copied = ClusterVectorEnv(2, "toy-v0", copy=True)
    o1, _ = copied.reset(seed=0)
    o2, *_ = copied.step(np.argmax(o1["action_mask"], axis=1))
    assert o2["jobs"] is not o1["jobs"]
    with pytest.raises(ValueError, match="num_envs"):
        ClusterVectorEnv(0, "toy-v0")
    with pytest.raises(ValueError, match="autoreset_mode"):
        ClusterVectorEnv(1, "toy-v0", autoreset_mode="next_step")


def test_benchmark_script_smoke():
    import subprocess
    import sys

    from tests.helpers import ONE_THREAD_ENV, ROOT

    args = ["--steps", "200", "--repeats", "1", "--scenario", "toy-v0", "--n", "1", "2"]
    if kernels.active().name != "numba":
        args += ["--backends", "python"]
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "vector_env.py"), *args],
                         capture_output=True, text=True, env=ONE_THREAD_ENV, timeout=300)
    assert out.returncode == 0, out.stderr
    rows = [line for line in out.stdout.splitlines() if line.startswith(("pettingzoo", "vector"))]
    names = ["pettingzoo (1 env)", "pettingzoo 2 envs in turn", "vector python N=1", "vector python N=2"]
    if kernels.active().name == "numba":
        names[2:2] = ["vector compiled N=1", "vector compiled N=2"]
        assert "cache load" in out.stdout
    assert [r.split("  ")[0] for r in rows] == names
    assert all(float(r.split()[-4].replace(",", "")) > 0 for r in rows)


def test_from_envs_render_and_close():
    envs = [cluster_env.parallel_env("toy-v0", render_mode="ansi") for _ in range(2)]
    vec = ClusterVectorEnv.from_envs(envs)
    assert vec.envs == envs and vec.invalid_action == "raise"
    vec.reset(seed=0)
    frames = vec.render()
    assert len(frames) == 2 and all(isinstance(f, str) and f for f in frames)
    with pytest.raises(ValueError, match="shapes"):
        ClusterVectorEnv.from_envs([envs[0], cluster_env.parallel_env("philly-v0")])
    with pytest.raises(ValueError, match="human"):
        ClusterVectorEnv(1, "toy-v0", render_mode="human")
    vec.close()
    assert envs[0].sim is None
    with pytest.raises(RuntimeError, match="closed"):
        vec.step(np.zeros(2, dtype=np.int64))


@needs_numba
def test_backend_choice_and_fallback():
    from cluster_env.vector.compiled import unsupported_reason

    assert isinstance(ClusterVectorEnv(2, "toy-v0").backend, CompiledBackend)          # the default: compiled
    assert type(ClusterVectorEnv(2, "toy-v0", backend="python").backend) is PythonBackend
    # Another reward runs compiled too (computed from the engine's totals) ...
    assert isinstance(ClusterVectorEnv(2, "toy-v0", reward="cost").backend, CompiledBackend)
    # ... what the compiled backend does not run falls back to the Python backend under "auto" ...
    for layout in ("extended", "extended-v2", "objectives-v1"):
        assert isinstance(ClusterVectorEnv(2, "toy-v0", observation=layout).backend, CompiledBackend), layout
    slow = ClusterVectorEnv(2, "toy-v0", render_mode="ansi")
    assert type(slow.backend) is PythonBackend
    assert "render modes" in unsupported_reason(slow.envs)
    # ... and is an error when asked for by name.
    with pytest.raises(ValueError, match="backend='compiled': render modes"):
        ClusterVectorEnv(2, "toy-v0", backend="compiled", render_mode="ansi")
    with pytest.raises(ValueError, match="backend must be one of"):
        ClusterVectorEnv(2, "toy-v0", backend="fast")


@needs_numba
def test_compiled_backend_preemption_guard_same_as_python():
    """Always the lowest allowed action with preemption preempts and restarts one job at one instant
    until ClusterParallelEnv's MAX_PREEMPTIONS_PER_INSTANT guard masks it: the compiled backend
    applies the same guard (a running candidate row masked out) and gives the same episodes."""
    kw = {"jobs_per_episode": 12, "preemption": True}
    vecs = [ClusterVectorEnv(2, "philly-v0", backend=b, **kw) for b in ("python", "compiled")]
    outs = [v.reset(seed=4) for v in vecs]
    K = vecs[0].K
    guarded = 0
    for _ in range(600):
        obs = outs[0][0]
        for k in (*FEATS, "action_mask"):
            assert outs[1][0][k].tobytes() == obs[k].tobytes(), k
        order = obs["orderer_mask"]
        ids = outs[0][-1]["job_ids"]
        guarded += int(((order[:, K:-1] == 0) & (ids[:, K:] >= 0) & (obs["phase"] == 0)[:, None]).sum())
        actions = np.argmax(obs["action_mask"], axis=1)
        outs = [v.step(actions) for v in vecs]
        for j in (1, 2, 3):
            assert outs[1][j].tobytes() == outs[0][j].tobytes()
    assert guarded > 0


@needs_numba
def test_compiled_backend_reseeding_after_steps_same_as_python():
    """Reseeding some envs after steps (new generators replace those the compiled step holds)."""
    vecs = [ClusterVectorEnv(3, "philly-v1", backend=b, jobs_per_episode=30) for b in ("python", "compiled")]
    for v in vecs:
        v.reset(seed=1)

    def run(steps: int) -> None:
        for _ in range(steps):
            actions = vecs[0].buffers.action_mask.argmax(axis=1)
            outs = [v.step(actions) for v in vecs]
            assert outs[0][1].tobytes() == outs[1][1].tobytes()
            for k in (*FEATS, "action_mask"):
                assert outs[0][0][k].tobytes() == outs[1][0][k].tobytes(), k

    run(100)
    outs = [v.reset(seed=[9, None, 4]) for v in vecs]
    for k in (*FEATS, "action_mask"):
        assert outs[0][0][k].tobytes() == outs[1][0][k].tobytes(), k
    run(300)


def _snapshot(vec: ClusterVectorEnv) -> dict:
    from cluster_env.envs.buffers import BUFFER_FIELDS

    return {k: np.copy(getattr(vec.buffers, k)) for k in BUFFER_FIELDS if k not in ("n_order", "n_place")}


@needs_numba
@pytest.mark.parametrize("mode,penalty", [("raise", 0.0), ("noop", 0.0), ("noop", 0.25), ("fallback", 0.0),
                                          ("fallback", 0.5)])
def test_action_checks_same_in_the_compiled_step_as_in_numpy(mode, penalty):
    """The compiled backend checks the actions inside its numba step (step_checked); the Python
    backend through the default numpy implementation. The same actions (allowed, forbidden, out of
    range, the dict form with a wrong no-op, other dtypes and layouts) give the same errors (and
    nothing stepped: every buffer as it was), the same invalid flags, played actions, penalties and
    episodes, and ``action_mask`` is each env's acting agent's mask."""
    kw = {"jobs_per_episode": 10, "preemption": True, "max_steps": 150}
    vecs = [ClusterVectorEnv(4, "philly-v0", backend=b, invalid_action=mode, invalid_penalty=penalty, **kw)
            for b in ("python", "compiled")]
    assert not vecs[0].backend.writes_action_mask and vecs[1].backend.writes_action_mask
    outs = [v.reset(seed=2) for v in vecs]
    rng = np.random.default_rng(1)
    A, n_order, n_place = vecs[0].n_actions, vecs[0].n_order, vecs[0].n_place
    raised = invalid_steps = 0
    for t in range(500):
        obs = outs[0][0]
        mask, phase = obs["action_mask"], obs["phase"]
        acting = np.array([_choose(rng, m, lazy=0.5) for m in mask], dtype=np.int64)
        kind = rng.integers(0, 10)
        if kind == 0:                                   # a forbidden action in one env
            i = rng.integers(0, 4)
            forbidden = np.flatnonzero(mask[i] == 0)
            if len(forbidden):
                acting[i] = rng.choice(forbidden)
        actions = acting
        if kind == 1:                                   # out of range
            actions = acting.copy()
            actions[rng.integers(0, 4)] = rng.choice([-1, A, A + 5])
        elif kind == 2:                                 # the dict form, sometimes a wrong no-op
            o = np.where(phase == 1, n_order - 1, acting)
            p = np.where(phase == 1, acting, n_place - 1)
            if rng.random() < 0.5:
                o = o.copy()
                o[rng.integers(0, 4)] = 0
            actions = {"orderer": o, "placer": p}
        elif kind == 3:                                 # not contiguous, not int64
            actions = np.stack([acting, acting], axis=1)[:, 0]
        elif kind == 4:
            actions = acting.astype(np.int32).tolist()
        before = [_snapshot(v) for v in vecs]
        results = []
        for v in vecs:
            try:
                results.append(v.step(actions))
            except Exception as exc:  # noqa: BLE001 - compared between the backends below
                results.append(exc)
        if isinstance(results[0], Exception):
            raised += 1
            assert type(results[1]) is type(results[0]) and str(results[1]) == str(results[0]), results
            for v, snap in zip(vecs, before):                   # nothing stepped, nothing written
                for k, value in _snapshot(v).items():
                    assert value.tobytes() == snap[k].tobytes(), k
            continue
        assert not isinstance(results[1], Exception), results[1]
        outs = results
        (o0, r0, te0, tr0, i0), (o1, r1, te1, tr1, i1) = outs
        for k in o0:
            assert o0[k].tobytes() == o1[k].tobytes(), (t, k)
        assert r0.tobytes() == r1.tobytes() and te0.tobytes() == te1.tobytes() and tr0.tobytes() == tr1.tobytes()
        assert i0["invalid_action"].tobytes() == i1["invalid_action"].tobytes()
        invalid_steps += int(i0["invalid_action"].any())
        if mode == "fallback":
            assert i0["played_action"].tolist() == i1["played_action"].tolist()
        # action_mask: each env's acting agent's mask, zero-padded
        for i in range(4):
            acting_mask = o1["placer_mask"][i] if o1["phase"][i] else o1["orderer_mask"][i]
            assert o1["action_mask"][i, : len(acting_mask)].tolist() == acting_mask.tolist()
            assert not o1["action_mask"][i, len(acting_mask):].any()
    assert raised > 20 and (mode == "raise" or invalid_steps > 20)


@needs_numba
def test_compiled_step_refuses_before_any_env_steps():
    """A forbidden action in the last env: the compiled step raises before env 0 steps (its row,
    rewards, counters and the invalid flags unchanged), in every mode for an action out of range."""
    for mode in ("raise", "noop", "fallback"):
        vec = ClusterVectorEnv(3, "philly-v0", invalid_action=mode, jobs_per_episode=10)
        assert isinstance(vec.backend, CompiledBackend)
        obs, infos = vec.reset(seed=0)
        actions = np.argmax(obs["action_mask"], axis=1)
        snap = _snapshot(vec)
        bad = actions.copy()
        bad[2] = vec.n_actions
        with pytest.raises(InvalidActionError, match="env 2: .* outside Discrete"):
            vec.step(bad)
        if mode == "raise":
            bad[2] = int(np.flatnonzero(obs["action_mask"][2] == 0)[0])
            with pytest.raises(InvalidActionError, match="env 2: .* is forbidden"):
                vec.step(bad)
        for k, value in _snapshot(vec).items():
            assert value.tobytes() == snap[k].tobytes(), (mode, k)
        vec.step(actions)
        assert infos["num_steps"].tolist() == [1, 1, 1]


def test_closing_a_vector_env_whose_constructor_failed_is_quiet():
    # gymnasium's VectorEnv.__del__ closes even an instance whose __init__ raised before the
    # backend existed; that close must not raise (it surfaced as an unraisable-exception warning).
    from cluster_env.vector.env import ClusterVectorEnv

    half_built = ClusterVectorEnv.__new__(ClusterVectorEnv)
    half_built.close_extras()
