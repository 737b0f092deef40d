"""The dual agent's fast inference path (dual_agent.paper.inference) gives the modules' logits bit for bit.

Each check compares the float64 logits of :func:`dual_agent.paper.inference.actor_logits` (what the
policy acts on) with ``network_logits`` through the ``nn.Module`` tree, byte for byte, for both
agents: on the observations of real episodes with the shipped checkpoints, and on random
observations (empty, full and partial candidate sets) with freshly initialised models.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

import cluster_env
from dual_agent.paper.config import DualAgentConfig
from dual_agent.paper.inference import actor_logits, fast_actors
from baselines.obs import M as COL
from dual_agent.paper import rwgp
from dual_agent.paper.policy import ORDERER, PLACER, DualAgentPolicy, build_model, joint_action, network_logits

torch.set_num_threads(1)


def _module_logits(model, agent: int, feats: dict) -> np.ndarray:
    with torch.inference_mode():
        batch = {k: torch.from_numpy(np.ascontiguousarray(v)).unsqueeze(0) for k, v in feats.items()}
        return network_logits(model, agent, batch)[0].double().numpy()


def _fast_logits(model, agent: int, feats: dict) -> np.ndarray:
    with torch.inference_mode():
        return actor_logits(model, agent, feats)


def _assert_same(model, feats: dict, where: str) -> None:
    for agent in (ORDERER, PLACER):
        want, got = _module_logits(model, agent, feats), _fast_logits(model, agent, feats)
        assert got.dtype == want.dtype and got.shape == want.shape, where
        assert got.tobytes() == want.tobytes(), f"{where}, agent {agent}: {np.abs(got - want).max()}"


@pytest.mark.parametrize("scenario", ["philly-v0", "openb-v0"])
def test_shipped_checkpoints_same_logits_on_real_observations(scenario):
    policy = DualAgentPolicy.pretrained(scenario)
    assert fast_actors(policy.model) is not None        # the shipped networks take the fast path
    env = cluster_env.parallel_env(scenario, split="test", **policy.env_overrides)
    obs, infos = env.reset(seed=3)
    policy.reset(3)
    phases = set()
    for step in range(250):
        feats = policy.features(obs, infos)
        _assert_same(policy.model, feats, f"{scenario} step {step}")
        agent, action, _, _ = policy.decide(obs, infos)
        phases.add(agent)
        obs, _, _, _, infos = env.step(joint_action(obs, agent, action))
        if not env.agents:
            break
    assert phases == {ORDERER, PLACER}


def _random_feats(rng: np.random.Generator, spaces: dict, valid: np.ndarray) -> dict:
    n, m = spaces["rows"], spaces["machines"]
    jobs = rng.normal(size=(n, len(spaces["job_features"]))).astype(np.float32)
    jobs[:, 0] = valid
    machines = rng.normal(size=(m, len(spaces["machine_features"]) + rwgp_columns())).astype(np.float32)
    return {"jobs": jobs, "machines": machines,
            "global": rng.normal(size=len(spaces["global_features"])).astype(np.float32),
            "placing": rng.normal(size=len(spaces["placing_features"])).astype(np.float32),
            "order_mask": np.ones(n + 1, bool), "place_mask": np.ones(m + 1, bool)}


def rwgp_columns() -> int:
    from dual_agent.paper.networks import GP_FEATURES

    return GP_FEATURES


def test_fresh_models_same_logits_on_random_observations():
    spaces = DualAgentPolicy.pretrained("openb-v0").spaces
    rng = np.random.default_rng(7)
    n = spaces["rows"]
    for seed, hidden in ((0, 64), (1, 32), (2, 17)):
        torch.manual_seed(seed)
        model = build_model(DualAgentConfig(hidden=hidden), spaces).eval()
        for valid in (np.zeros(n), np.ones(n), (rng.random(n) < 0.5).astype(float), np.eye(1, n, n - 1)[0]):
            _assert_same(model, _random_feats(rng, spaces, valid.astype(np.float32)), f"hidden {hidden}")


def test_other_sizes_and_updated_weights_are_followed():
    """Another number of candidate rows and machines (allow_transfer), and weights changed in place
    after the first call (a training iteration's load_state_dict)."""
    spaces = DualAgentPolicy.pretrained("philly-v0").spaces
    rng = np.random.default_rng(1)
    torch.manual_seed(0)
    model = build_model(DualAgentConfig(), spaces).eval()
    small = dict(spaces, rows=5, machines=3)
    _assert_same(model, _random_feats(rng, small, np.array([1, 0, 1, 1, 0], np.float32)), "small")
    torch.manual_seed(1)
    model.load_state_dict(build_model(DualAgentConfig(), spaces).state_dict())
    _assert_same(model, _random_feats(rng, spaces, np.ones(spaces["rows"], np.float32)), "reloaded")


def test_models_it_does_not_mirror_use_the_modules():
    spaces = DualAgentPolicy.pretrained("openb-v0").spaces
    rng = np.random.default_rng(2)
    torch.manual_seed(3)
    hooked = build_model(DualAgentConfig(), spaces).eval()
    calls = []
    hooked.placer.head.register_forward_hook(lambda *a: calls.append(1))
    assert fast_actors(hooked) is None
    changed = build_model(DualAgentConfig(), spaces).eval()
    changed.orderer.gate = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU())
    assert fast_actors(changed) is None
    feats = _random_feats(rng, spaces, np.ones(spaces["rows"], np.float32))
    for model in (hooked, changed):
        _assert_same(model, feats, type(model.orderer.gate).__name__)
    assert calls                                   # the hooked model ran through its modules


def test_policy_decisions_take_the_fast_path(monkeypatch):
    """Sampling policies (training workers) act on FastActors' logits; arg max policies on the
    portable ones (dual_agent.paper.portable, tests/test_dual_portable.py), never on torch's."""
    from dual_agent.paper import inference, portable

    seen = []
    original = inference.FastActors.logits
    monkeypatch.setattr(inference.FastActors, "logits", lambda self, a, f: seen.append(a) or original(self, a, f))
    ported = []
    original_portable = portable.PortableActors.logits
    monkeypatch.setattr(portable.PortableActors, "logits",
                        lambda self, a, *args: ported.append(a) or original_portable(self, a, *args))
    for deterministic in (False, True):
        policy = DualAgentPolicy.pretrained("openb-v0", deterministic=deterministic)
        env = cluster_env.parallel_env("openb-v0", split="test", **policy.env_overrides)
        obs, infos = env.reset(seed=0)
        policy.reset(0)
        for _ in range(40):
            obs, _, _, _, infos = env.step(policy.act(obs, infos))
        if not deterministic:
            assert seen and not ported
            sampled = len(seen)
    assert ported and len(seen) == sampled


def test_gp_update_skips_repeated_readings_exactly():
    """RandomWalkGP.update returns early when the measured speeds and ages repeat; the posterior is
    the one a GP updated at every call gives (byte for byte)."""
    scenario = "philly-v0"
    env = cluster_env.parallel_env(scenario, split="test", preemption=True)
    obs, infos = env.reset(seed=1)
    policy = DualAgentPolicy.pretrained(scenario)
    policy.reset(1)
    fast, slow = rwgp.RandomWalkGP(), rwgp.RandomWalkGP()
    machines = obs["orderer"]["machines"]
    fast.reset(machines)
    slow.reset(machines)
    repeats = 0
    last = None
    for _ in range(300):
        machines = obs["orderer"]["machines"]
        cols = machines[:, [COL["measured_speed"], COL["measured_age_log"]]].tobytes()
        repeats += cols == last
        last = cols
        fast.update(machines)
        # The full update on every call: forget the last raw readings so no shortcut applies.
        slow._last_age_log = np.full(len(machines), np.nan)
        slow._seen = None
        slow.update(machines)
        for a, b in zip(fast.posterior(), slow.posterior()):
            assert a.tobytes() == b.tobytes()
        obs, _, _, _, infos = env.step(policy.act(obs, infos))
    assert repeats > 20


def test_gp_solve_by_lapack_equals_scipy_wrappers():
    """The posterior's algebra through the LAPACK routines directly gives the scipy wrappers' bits,
    on the GP's states of a real episode and on random systems of both factor shapes."""
    env = cluster_env.parallel_env("philly-v0", split="test", preemption=True)
    obs, infos = env.reset(seed=2)
    policy = DualAgentPolicy.pretrained("philly-v0")
    policy.reset(2)
    gp = rwgp.RandomWalkGP()
    gp.reset(obs["orderer"]["machines"])
    systems = []
    for _ in range(150):
        gp.update(obs["orderer"]["machines"])
        systems.append((gp._a.copy(), gp._b.copy(), gp._phi_t))
        obs, _, _, _, infos = env.step(policy.act(obs, infos))
    rng = np.random.default_rng(4)
    for r, m in ((64, 1213), (34, 34), (5, 3)):
        x = rng.normal(size=(r, r))
        systems.append((np.eye(r) + x @ x.T, rng.normal(size=r), np.ascontiguousarray(rng.normal(size=(r, m)))))
    for a, b, phi_t in systems:
        fast = rwgp._lapack_solve(a, b, phi_t)
        assert fast is not None
        for got, want in zip(fast, rwgp._scipy_solve(a, b, phi_t)):
            assert got.shape == want.shape and got.tobytes() == np.asarray(want).tobytes()
    assert rwgp._lapack_solve(-np.eye(3), np.ones(3), np.ones((3, 2))) is None   # not positive definite
    with pytest.raises(np.linalg.LinAlgError):
        rwgp._scipy_solve(-np.eye(3), np.ones(3), np.ones((3, 2)))


def test_gp_reading_scan_is_the_numpy_expressions():
    """RandomWalkGP's compiled scan of the readings gives the numpy expressions' repeat check,
    changed machines and refresh decision, NaN readings, repeated values and ages that go back
    included."""
    rng = np.random.default_rng(3)
    for trial in range(300):
        m = int(rng.integers(1, 12))
        measured, on = rng.random(m) < 0.7, rng.random(m) < 0.7
        last_value = rng.choice([0.5, 1.0, 1.5, np.nan], m).astype(np.float32)
        value = np.where(rng.random(m) < 0.6, last_value, rng.choice([0.5, 1.0, np.nan], m)).astype(np.float32)
        last_age = rng.choice([-1.0, 10.0, 400.0, 900.0], m)
        age = np.where(rng.random(m) < 0.5, last_age + rng.choice([0.0, 5.0, -5.0], m), rng.random(m) * 1000)
        frozen = rng.choice([0.0, 100.0, np.nan if trial % 7 == 0 else 50.0], m)
        refresh = float(rng.choice([60.0, 600.0]))
        age_log = np.log1p(np.maximum(age, 0.0))
        last_age_log = np.where(rng.random(m) < 0.8, age_log, rng.choice([0.0, np.nan], m))
        same, changed, again = rwgp._scan_readings(measured, on, value, last_value, age, last_age, frozen, refresh,
                                                   age_log, last_age_log)
        want = (measured != on) | (measured & ((value != last_value) | (age < last_age)))
        stale = measured & ~want
        want_again = bool(stale.any() and float((age[stale] - frozen[stale]).max()) >= refresh)
        want_same = np.array_equal(value, last_value) and np.array_equal(age_log, last_age_log)
        assert changed.tolist() == want.tolist() and bool(again) == want_again, trial
        assert bool(same) == want_same, trial
