"""The parallel env's compiled step (backend="auto", the default) against its Python simulator
(backend="python"): the same seeds and actions give every step's observations, rewards, flags and
infos bit for bit; reading ``env.sim`` mid-episode hands the episode to Python unchanged."""
from __future__ import annotations

import numpy as np
import pytest

import cluster_env
from cluster_env.core import kernels
from cluster_env.errors import InvalidActionError

pytestmark = pytest.mark.skipif(kernels.active().name != "numba", reason="the compiled step needs numba")


def _pair(scenario, **kw):
    fast = cluster_env.parallel_env(scenario, **kw)
    slow = cluster_env.parallel_env(scenario, backend="python", **kw)
    return fast, slow


def _same(a, b, where):
    """Deep equality of step outputs: arrays with dtype and bits, dicts key by key."""
    if isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), (where, sorted(a), sorted(b))
        for k in a:
            _same(a[k], b[k], f"{where}/{k}")
    elif isinstance(a, (tuple, list)):
        assert type(a) is type(b) and len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            _same(x, y, f"{where}[{i}]")
    elif isinstance(a, np.ndarray):
        assert isinstance(b, np.ndarray) and a.dtype == b.dtype and a.shape == b.shape, where
        assert np.array_equal(a, b, equal_nan=a.dtype.kind == "f"), where
    elif isinstance(a, float) and a != a:
        assert b != b, where
    else:
        assert type(a) is type(b) and a == b, (where, a, b)


def _actions(obs, rng, wild):
    """A masked random decision of the acting agent; with probability ``wild`` any action of
    either agent (forbidden ones included)."""
    out = {}
    for agent, o in obs.items():
        mask = o["action_mask"]
        if rng.random() < wild:
            out[agent] = int(rng.integers(len(mask)))
        else:
            allowed = np.flatnonzero(mask)
            out[agent] = int(rng.choice(allowed))
    return out


def _play_both(fast, slow, seed, wild=0.0, hand_off_at=None, limit=3000):
    obs_f, info_f = fast.reset(seed=seed)
    obs_s, info_s = slow.reset(seed=seed)
    _same((obs_f, info_f), (obs_s, info_s), "reset")
    rng = np.random.default_rng(seed)
    steps = 0
    while fast.agents and steps < limit:
        if steps == hand_off_at:
            assert fast.engine == "compiled"
            assert fast.sim is not None          # the hand-off: the episode goes on in Python
            assert fast.engine == "python"
        act = _actions(obs_f, rng, wild)
        out_f = fast.step(dict(act))
        out_s = slow.step(dict(act))
        _same(out_f, out_s, f"step {steps}")
        obs_f = out_f[0]
        steps += 1
    assert not slow.agents or steps == limit
    return steps


@pytest.mark.parametrize("scenario, kw", [
    ("philly-v1", {"jobs_per_episode": 40}),
    ("philly-hetero-v2", {"jobs_per_episode": 40}),
    ("toy-v0", {"preemption": True, "max_steps": 400}),
    ("philly-tenants-v1", {"jobs_per_episode": 40}),
    ("philly-slo-v1", {"jobs_per_episode": 40, "preemption": True}),
    ("philly-hetero-v2", {"jobs_per_episode": 40, "observation": "extended"}),
    ("toy-v0", {"preemption": True, "max_steps": 400, "observation": "extended"}),
    ("philly-hetero-v2", {"jobs_per_episode": 40, "observation": "extended-v2", "preemption": True}),
    ("philly-tenants-v1", {"jobs_per_episode": 40, "observation": "objectives-v1", "preemption": True}),
])
def test_compiled_and_python_backends_step_the_same(scenario, kw):
    fast, slow = _pair(scenario, **kw)
    _play_both(fast, slow, seed=3)
    assert fast.engine == "compiled"
    _same(fast.metrics(), slow.metrics(), "metrics")
    view_f, view_s = fast.episode_view(), slow.episode_view()
    _same(view_f.jobs.__dict__, view_s.jobs.__dict__, "jobs")
    assert (view_f.now, view_f.events, view_f.num_jobs) == (view_s.now, view_s.events, view_s.num_jobs)
    for name in ("submit", "duration", "gpus", "best_speed"):
        _same(getattr(view_f, name), getattr(view_s, name), name)
    assert fast.engine == "compiled"          # neither read needed the Python simulator


@pytest.mark.parametrize("mode", ["noop", "fallback"])
def test_forbidden_actions_are_ignored_or_replaced_alike(mode):
    fast, slow = _pair("philly-hetero-v2", jobs_per_episode=30, invalid_action=mode, preemption=True)
    _play_both(fast, slow, seed=5, wild=0.3)
    assert fast.fallbacks == slow.fallbacks
    if mode == "fallback":
        assert fast.fallbacks > 0


def test_a_forbidden_action_raises_the_same_error_and_changes_nothing():
    fast, slow = _pair("philly-v1", jobs_per_episode=20)
    for env in (fast, slow):
        obs, _ = env.reset(seed=1)
        bad = int(np.flatnonzero(obs["orderer"]["action_mask"] == 0)[0])
        with pytest.raises(InvalidActionError, match="forbidden in the ORDER phase"):
            env.step({"orderer": bad, "placer": len(obs["placer"]["action_mask"]) - 1})
    assert fast.num_steps == slow.num_steps == 0
    _play_both(fast, slow, seed=1)


@pytest.mark.parametrize("at", [0, 7, 60])
def test_reading_sim_hands_the_episode_to_python_bit_for_bit(at):
    fast, slow = _pair("philly-hetero-v2", jobs_per_episode=30, preemption=True)
    _play_both(fast, slow, seed=2, hand_off_at=at, wild=0.0)
    assert fast.engine == "python"
    _same(fast.metrics(), slow.metrics(), "metrics")
    # The next episode runs compiled again.
    fast.reset(seed=4)
    assert fast.engine == "compiled"


def test_hand_off_after_the_episode_ended_gives_the_final_simulator():
    fast, slow = _pair("philly-tenants-v1", jobs_per_episode=30)
    _play_both(fast, slow, seed=6)
    sim_f, sim_s = fast.sim, slow.sim
    assert np.array_equal(sim_f.jobs.finish, sim_s.jobs.finish, equal_nan=True)
    assert sim_f.now == sim_s.now and sim_f.events == sim_s.events
    assert sim_f.allocation_log == sim_s.allocation_log


def test_truncation_and_state_are_the_same():
    fast, slow = _pair("philly-v1", jobs_per_episode=60, max_steps=50)
    steps = _play_both(fast, slow, seed=0)
    assert steps == 50
    fast.reset(seed=9)
    slow.reset(seed=9)
    _same(fast.state(), slow.state(), "state")


def test_the_default_env_runs_compiled_and_backend_is_checked():
    env = cluster_env.parallel_env()
    env.reset(seed=0)
    assert env.backend == "auto" and env.engine == "compiled"
    for layout in ("extended", "extended-v2", "objectives-v1"):
        env = cluster_env.parallel_env(observation=layout)
        env.reset(seed=0)
        assert env.engine == "compiled", layout
    drawn = cluster_env.parallel_env(render_mode="ansi")
    drawn.reset(seed=0)
    assert drawn.engine == "python"
    with pytest.raises(ValueError, match="backend='compiled' cannot run .*render modes"):
        cluster_env.parallel_env(render_mode="ansi", backend="compiled")
    with pytest.raises(ValueError, match="backend must be one of"):
        cluster_env.parallel_env(backend="numba")


def test_single_agent_view_steps_alike_on_both_backends():
    """The views' padded indices reach ``ignore_step`` (the compiled step plays nothing then)."""
    from cluster_env.wrappers import HeteroClusterFlatEnv

    outs = []
    for backend in ("auto", "python"):
        view = HeteroClusterFlatEnv("philly-hetero-v2", jobs_per_episode=25, invalid_action="noop", backend=backend)
        obs, _ = view.reset(seed=8)
        rng = np.random.default_rng(8)
        trail = [obs]
        done = False
        while not done:
            obs, reward, term, trunc, info = view.step(int(rng.integers(view.action_space.n)))
            trail.append((obs, reward, term, trunc))
            done = term or trunc
        outs.append((trail, view.unwrapped.metrics()))
        assert view.env.engine == ("compiled" if backend == "auto" else "python")
    _same(outs[0][1], outs[1][1], "metrics")
    assert len(outs[0][0]) == len(outs[1][0])
    for i, (a, b) in enumerate(zip(*(o[0] for o in outs))):
        _same(a, b, f"view step {i}")


def test_observations_stay_what_they_were_whatever_the_caller_keeps():
    """The compiled step hands out arrays without copying them only when nothing else holds them:
    kept observations, kept dicts and kept views of them never change afterwards."""
    env = cluster_env.parallel_env("philly-hetero-v2", jobs_per_episode=30)
    obs, infos = env.reset(seed=0)
    kept, views = [], []
    step = 0
    while env.agents:
        if step % 3 == 0:           # the whole dict (its arrays with it)
            kept.append((obs, {a: {k: v.copy() for k, v in o.items()} for a, o in obs.items()}))
        if step % 5 == 1:           # only a view of one array
            view = obs["placer"]["machines"][:, 3]
            views.append((view, view.copy()))
        if step % 7 == 2:           # the job ids of the infos
            views.append((infos["orderer"]["job_ids"], infos["orderer"]["job_ids"].copy()))
        previous = obs
        obs, _, _, _, infos = env.step({a: int(o["action_mask"].argmax()) for a, o in obs.items()})
        assert obs["orderer"]["jobs"] is not previous["orderer"]["jobs"]
        step += 1
    assert step > 30 and env.engine == "compiled"
    for held, copy in kept:
        _same(held, copy, "kept observation")
    for held, copy in views:
        assert np.array_equal(held, copy)


def test_a_replay_that_leaves_the_engine_is_an_error_not_another_episode(monkeypatch):
    env = cluster_env.parallel_env("philly-v1", jobs_per_episode=20)
    obs, _ = env.reset(seed=0)
    for _ in range(6):
        obs, *_ = env.step({a: int(o["action_mask"].argmax()) for a, o in obs.items()})
    env._trace.pop()                 # the replay now misses the last decision
    with pytest.raises(RuntimeError, match="replay of this episode did not end where the episode stood"):
        env.sim


def _every_total(stats):
    """A reward reading every field of the step's statistics."""
    return -(stats.dt + 3.0 * stats.job_seconds + 7.0 * stats.fee + 11.0 * stats.energy_kwh) + stats.jobs_finished


@pytest.mark.parametrize("scenario, reward", [("philly-hetero-v2", _every_total), ("philly-slo-v1", "objectives"),
                                              ("philly-v1", "cost")])
def test_other_rewards_run_compiled_with_the_same_bits(scenario, reward):
    fast, slow = _pair(scenario, jobs_per_episode=30, reward=reward)
    _play_both(fast, slow, seed=7)
    assert fast.engine == "compiled"


@pytest.mark.parametrize("scenario, reward", [("philly-slo-v1", "objectives"), ("philly-hetero-v2", _every_total)])
def test_the_compiled_vector_backend_gives_other_rewards_too(scenario, reward):
    from cluster_env.vector import ClusterVectorEnv
    from cluster_env.vector.compiled import CompiledBackend

    runs = []
    for backend in ("compiled", "python"):
        vec = ClusterVectorEnv(3, scenario, jobs_per_episode=20, reward=reward, backend=backend,
                               invalid_action="noop", invalid_penalty=0.25)
        assert isinstance(vec.backend, CompiledBackend) == (backend == "compiled")
        obs, _ = vec.reset(seed=11)
        rng = np.random.default_rng(11)
        rewards = []
        for _ in range(300):
            acts = rng.integers(vec.n_actions, size=3)
            obs, r, _, _, _ = vec.step(acts)
            rewards.append(r.copy())
        runs.append(np.array(rewards))
    assert np.array_equal(runs[0], runs[1])
    assert (runs[0] != 0).any()


@pytest.mark.parametrize("scenario, layout", [("philly-hetero-v2", "extended"), ("philly-hetero-v2", "extended-v2"),
                                              ("philly-slo-v1", "objectives-v1")])
def test_the_compiled_vector_backend_writes_every_layout_too(scenario, layout):
    from cluster_env.vector import ClusterVectorEnv
    from cluster_env.vector.compiled import CompiledBackend

    runs = []
    for backend in ("compiled", "python"):
        vec = ClusterVectorEnv(3, scenario, jobs_per_episode=20, observation=layout, backend=backend,
                               preemption=True, invalid_action="noop")
        assert isinstance(vec.backend, CompiledBackend) == (backend == "compiled")
        obs, _ = vec.reset(seed=5)
        rng = np.random.default_rng(5)
        trail = [vec.flat_observations().copy()]
        for _ in range(300):          # episodes end and restart inside (same-step autoreset)
            vec.step(rng.integers(vec.n_actions, size=3))
            trail.append(vec.flat_observations().copy())
        runs.append(np.array(trail))
    assert runs[0].shape[-1] > 0 and np.array_equal(runs[0], runs[1])


@pytest.mark.parametrize("reward", [None, "objectives"])
def test_a_hand_off_calls_no_reward_again_and_the_rewards_go_on_alike(reward):
    calls = []

    def counting(stats):
        calls.append(stats)
        return -stats.job_seconds - stats.fee

    spec = counting if reward is None else reward
    kw = {"jobs_per_episode": 30, "reward": spec}
    fast, slow = _pair("philly-slo-v1", **kw)
    _play_both(fast, slow, seed=4, hand_off_at=25)
    assert fast.engine == "python"
    if reward is None:
        assert len(calls) == 2 * fast.num_steps      # one call per step of each env, none in the replay


@pytest.mark.parametrize("backend", ["auto", "python"])
def test_a_copy_or_pickle_mid_episode_goes_on_as_the_original(backend):
    """(Before the copy replayed the episode, a copy's simulator lost the views between its arrays
    and went on differently.)"""
    import copy
    import pickle

    env = cluster_env.parallel_env("philly-hetero-v2", jobs_per_episode=25, observation="extended", backend=backend)
    obs, _ = env.reset(seed=1)
    for _ in range(9):
        obs, *_ = env.step({a: int(o["action_mask"].argmax()) for a, o in obs.items()})
    copies = [copy.deepcopy(env), pickle.loads(pickle.dumps(env))]
    assert env.engine == "python" and all(c.engine == "python" for c in copies)
    envs = [env, *copies]
    while env.agents:
        act = {a: int(o["action_mask"].argmax()) for a, o in obs.items()}
        outs = [e.step(dict(act)) for e in envs]
        for out in outs[1:]:
            _same(out, outs[0], "copy")
        obs = outs[0][0]
    for e in envs:                       # and the next episodes run as the backend says, alike
        e.reset(seed=2)
        assert e.engine == ("compiled" if backend == "auto" else "python")
    _same(envs[1].step({"orderer": 0, "placer": envs[1].action_space("placer").n - 1}),
          envs[0].step({"orderer": 0, "placer": envs[0].action_space("placer").n - 1}), "next episode")
