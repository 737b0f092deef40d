"""The dual agent's arg max acts on portable logits (dual_agent.paper.portable): the same bits on every CPU.

* the compiled kernels give the bits of their pure-Python versions (IEEE operations in the written
  order: no fused multiply-add, no reassociation, no C library maths), and the logits are the torch
  modules' to float32 round-off;
* its own ``exp`` and ``tanh`` are correct to a few ulps;
* identical candidate rows get identical logits (the arg max takes the lowest index);
* the checked-in scores of the shipped agent are both portable and sensitive: scored with every
  weight and every Random Walk GP solution moved by one float64 ulp (what another CPU's LAPACK or
  a last-bit difference anywhere would do), ``check_scores`` still passes; with the weights
  changed by 1% (a real change), it fails.
"""
from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

import cluster_env
from baselines.harness.scores import check_scores, packaged_scores_file
from dual_agent.paper import portable, rwgp
from dual_agent.paper.policy import ORDERER, PLACER, DualAgentPolicy, joint_action, network_logits

torch.set_num_threads(1)


def _steps(scenario: str, want: int = 2) -> list[tuple[int, dict]]:
    """Features of the first ``want`` learned decisions of each agent in a real episode."""
    policy = DualAgentPolicy.pretrained(scenario)
    env = cluster_env.parallel_env(scenario, split="test", **policy.env_overrides)
    obs, infos = env.reset(seed=1)
    policy.reset(1)
    seen: list[tuple[int, dict]] = []
    while env.agents and min(sum(a == k for a, _ in seen) for k in (ORDERER, PLACER)) < want:
        agent, action, learned, feats = policy.decide(obs, infos)
        if learned and sum(a == agent for a, _ in seen) < want:
            seen.append((agent, feats))
        obs, _, _, _, infos = env.step(joint_action(obs, agent, action))
    return seen


def test_compiled_kernels_give_the_bits_of_their_python_versions(monkeypatch):
    policy = DualAgentPolicy.pretrained("philly-v0")
    actors = portable.portable_actors(policy.model)
    steps = _steps("philly-v0", want=1)
    compiled = [actors.logits(agent, feats) for agent, feats in steps]
    for name in (*portable.KERNELS, *portable.SCALARS):      # the same code, run by the interpreter
        monkeypatch.setattr(portable, name, getattr(portable, name).py_func)
    for (agent, feats), fast in zip(steps, compiled):
        slow = actors.logits(agent, feats)
        assert slow.dtype == np.float64 and slow.tobytes() == fast.tobytes(), np.abs(slow - fast).max()
        with torch.inference_mode():
            batch = {k: torch.from_numpy(np.ascontiguousarray(v)).unsqueeze(0)
                     for k, v in feats.items() if k in ("jobs", "machines", "global", "placing")}
            want = network_logits(policy.model, agent, batch)[0].double().numpy()
        assert np.allclose(fast, want, rtol=1e-5, atol=1e-4)   # the same network, float32 round-off


def test_own_exp_and_tanh_are_accurate():
    portable._compile()
    xs = np.concatenate([np.linspace(-30, 30, 2001), np.geomspace(1e-12, 0.2, 200), [0.0, 0.17, 0.34, 20.5]])
    for x in xs:
        assert math.isclose(portable._tanh(x), math.tanh(x), rel_tol=1e-15, abs_tol=1e-300), x
        assert math.isclose(portable._tanh(-x), -math.tanh(x), rel_tol=1e-15, abs_tol=1e-300), x
        if x < 600:
            assert math.isclose(portable._exp(x), math.exp(x), rel_tol=1e-15), x
        assert math.isclose(portable._sigmoid(x), 1 / (1 + math.exp(-x)), rel_tol=1e-15), x
    for f in (portable._tanh, portable._sigmoid, portable._exp):       # NaN in, NaN out (never a
        assert math.isnan(f(math.nan))                                 # wild table index)
    assert portable._tanh(math.inf) == 1.0 and portable._tanh(-math.inf) == -1.0
    assert portable._sigmoid(math.inf) == 1.0 and portable._sigmoid(-math.inf) == 0.0


def _branchy_tanh(x: float) -> float:
    """The portable tanh as first written (branches, ``_exp``'s table of powers of two): the
    branch-free ``portable._tanh`` must give its bits."""
    if x != x:
        return x
    a = abs(x)
    if a > 20.0:
        t = 1.0
    else:
        e = portable._expm1_small(2.0 * a) if 2.0 * a <= 0.34 else portable._exp(2.0 * a) - 1.0
        t = e / (e + 2.0)
    return -t if x < 0.0 else t


def test_branch_free_tanh_has_the_bits_of_the_branchy_one():
    portable._compile()
    rng = np.random.default_rng(0)
    edges = np.array([0.17, 20.0, 0.34, 1e-300, 5e-324, 709.0, np.inf])
    xs = np.concatenate([rng.standard_normal(200_000) * s for s in (0.01, 0.2, 1.0, 4.0, 30.0)]
                        + [np.linspace(-21, 21, 100_001), edges, np.nextafter(edges, 0), np.nextafter(edges, np.inf)])
    xs = np.concatenate([xs, -xs, [0.0, -0.0, np.nan]])
    want = np.array([_branchy_tanh(float(x)) for x in xs])
    got = _tanh_rows(xs)
    assert got.view(np.uint64).tolist() == want.view(np.uint64).tolist()


def _tanh_rows(xs: np.ndarray) -> np.ndarray:
    """``portable._tanh`` on every value the way the dense layers call it (one compiled loop)."""
    out = xs.reshape(1, -1).copy()
    portable._bias_act(out, np.zeros(len(xs)), True)
    return out[0]


def test_identical_candidates_get_identical_logits_and_the_lowest_index_wins():
    policy = DualAgentPolicy.pretrained("philly-v0")
    (agent, feats), = [s for s in _steps("philly-v0", want=1) if s[0] == ORDERER]
    jobs = feats["jobs"].copy()
    jobs[:] = jobs[0]                                 # every candidate row the same job
    logits = portable.portable_actors(policy.model).logits(ORDERER, {**feats, "jobs": jobs})
    assert len(set(logits[:-1].tobytes()[i:i + 8] for i in range(0, 8 * (len(logits) - 1), 8))) == 1
    mask = np.ones(len(logits), bool)
    mask[:3] = False
    assert policy.choose_from_logits(ORDERER, logits, mask) in (3, len(logits) - 1)


def _one_seed_file(tmp_path, scenario: str = "philly-v0", seed: int = 0):
    """A scores file with the checked-in entry of the shipped dual agent on one seed."""
    data = json.loads(packaged_scores_file(scenario).read_text())
    data["seeds"] = [seed]
    data["scores"] = {scenario: {"dual": {str(seed): data["scores"][scenario]["dual"][str(seed)]}}}
    path = tmp_path / "dual.json"
    path.write_text(json.dumps(data))
    return path


def _perturb_weights(monkeypatch, change):
    original = portable._layers
    monkeypatch.setattr(portable, "_layers", lambda pairs: tuple((change(w), change(b)) for w, b in original(pairs)))


def test_checked_in_dual_scores_survive_last_bit_noise_and_catch_a_real_change(tmp_path, monkeypatch):
    path = _one_seed_file(tmp_path)
    with monkeypatch.context() as patch:              # one ulp up on every weight and GP solution
        _perturb_weights(patch, lambda a: np.nextafter(a, np.inf))
        solve = rwgp._lapack_solve

        def noisy_solve(a, b, phi_t):
            solved = solve(a, b, phi_t)
            return None if solved is None else tuple(np.nextafter(s, np.inf) for s in solved)
        patch.setattr(rwgp, "_lapack_solve", noisy_solve)
        assert check_scores(path, backend="serial") == []
    with monkeypatch.context() as patch:              # a real change: every weight 1% larger
        _perturb_weights(patch, lambda a: a * 1.01)
        drifts = check_scores(path, backend="serial")
    assert drifts and {d.policy for d in drifts} == {"dual"}


def test_masked_argmax_is_numpys_with_the_lowest_index_on_ties():
    """The deterministic policy's compiled arg max: numpy's over the allowed logits (the others at
    -inf), ties to the lowest index; -1 for a non-finite allowed logit, -2 for an empty mask."""
    rng = np.random.default_rng(5)
    for trial in range(2000):
        n = int(rng.integers(1, 12))
        logits = rng.choice([-2.0, 0.0, 0.5, 1.0, 3.0], n) + (rng.random(n) if trial % 2 else 0.0)
        mask = rng.random(n) < 0.6
        if trial % 9 == 0:
            logits[int(rng.integers(n))] = rng.choice([np.nan, np.inf, -np.inf])
        got = portable.masked_argmax(logits, mask)
        if not mask.any():
            assert got == -2
        elif not np.isfinite(logits[mask]).all():
            assert got == -1
        else:
            assert got == int(np.argmax(np.where(mask, logits, -np.inf))), trial


def _reference_dense(x: np.ndarray, wt: np.ndarray, b: np.ndarray, act: bool) -> np.ndarray:
    """A dense layer as the contract states it, in Python floats: each sum from k = 0 upwards,
    the bias added last, then the portable tanh."""
    out = np.empty((x.shape[0], wt.shape[1]))
    for r in range(x.shape[0]):
        for j in range(wt.shape[1]):
            s = 0.0
            for k in range(x.shape[1]):
                s = s + float(x[r, k]) * float(wt[k, j])
            s = s + float(b[j])
            out[r, j] = _branchy_tanh(s) if act else s
    return out


def test_dense_layers_sum_in_the_stated_order_for_every_shape():
    """The compiled layers (four rows, eight terms per pass at width 64; two rows elsewhere; a
    register per sum for narrow layers) give the bits of the plain ordered sums, tails included."""
    portable._compile()
    rng = np.random.default_rng(7)
    for rows in (0, 1, 2, 3, 4, 5, 7, 9):
        for inner in (1, 7, 8, 9, 17, 27):
            for width in (1, 5, 33, 64):
                x, wt, b = rng.standard_normal((rows, inner)), rng.standard_normal((inner, width)), rng.standard_normal(width)
                for act in (False, True):
                    got = portable._dense(x, wt, b, act)
                    assert got.tobytes() == _reference_dense(x, wt, b, act).tobytes(), (rows, inner, width, act)
