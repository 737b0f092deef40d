"""The portable actors compute each distinct row once (the torch agent's
episode in seconds): the observation's padding rows once for all, the machine encoder only on the
machines whose row changed, the job encoder only on the candidate rows the last decision did not
see; given the acting agent's mask, the heads score only the actions it allows (a
1,000-job window in about 2 s). The logits the arg max reads keep their bits (each row is mapped
on its own)."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from dual_agent.paper import portable  # noqa: E402
from dual_agent.paper.policy import ORDERER, PLACER, DualAgentPolicy  # noqa: E402

torch.set_num_threads(1)


_PYTHON: dict = {}


def _interpreted(monkeypatch) -> None:
    """Every kernel as its pure-Python version (looked up as module globals: patchable)."""
    if not _PYTHON:
        portable._compile()
        _PYTHON.update({name: getattr(portable, name).py_func for name in (*portable.KERNELS, *portable.SCALARS)})
    for name, function in _PYTHON.items():
        monkeypatch.setattr(portable, name, function)


def _full(actors: portable.PortableActors, agent: int, feats: dict) -> np.ndarray:
    """The logits with every row computed and every action scored (what the actors did before
    the savings), by fresh actors."""
    with pytest.MonkeyPatch.context() as patch:
        _interpreted(patch)
        patch.setattr(portable, "_distinct_rows", lambda jobs, bits: (np.arange(len(jobs)), np.arange(len(jobs))))
        return portable.PortableActors(actors._o, actors._p, actors._noop).logits(agent, feats)


def _feats(rng: np.random.Generator, valid: int, rows: int = 40, machines: int = 34) -> dict:
    """The actors' inputs: 14 job features (column 0: valid), 11 machine features + the GP's mean
    and deviation, 10 global and 9 placing features."""
    jobs = np.zeros((rows, 14), np.float32)
    jobs[:valid] = rng.random((valid, 14))
    jobs[:valid, 0] = 1.0
    return {"jobs": jobs, "machines": rng.random((machines, 13)).astype(np.float32),
            "global": rng.random(10).astype(np.float32), "placing": rng.random(9).astype(np.float32)}


def _shipped_case(seed: int, valid: int):
    """The shipped philly-v0 agent's portable actors, random features with ``valid`` candidates, and
    both agents' full logits on them (the reference every test compares bits with)."""
    policy = DualAgentPolicy.pretrained("philly-v0")
    actors = portable.portable_actors(policy.model)
    rng = np.random.default_rng(seed)
    feats = _feats(rng, valid=valid)
    return policy, actors, rng, feats, [_full(actors, agent, feats) for agent in (ORDERER, PLACER)]


def test_padding_rows_and_unchanged_machines_are_computed_once_with_the_same_bits(monkeypatch):
    policy, actors, rng, feats, want = _shipped_case(0, valid=5)
    compiled = portable.portable_actors(policy.model)
    assert compiled.logits(ORDERER, feats).tobytes() == want[0].tobytes()        # the compiled kernels too
    assert compiled.logits(PLACER, feats).tobytes() == want[1].tobytes()
    _interpreted(monkeypatch)
    real, layers = portable._dense, []            # (rows, inputs) of every dense layer

    def counting(x, wt, b, act):
        layers.append(x.shape)
        return real(x, wt, b, act)
    monkeypatch.setattr(portable, "_dense", counting)
    encoded = (lambda: [rows for rows, width in layers if width == feats["jobs"].shape[1]])   # job encoder
    got = actors.logits(ORDERER, feats)
    assert got.tobytes() == want[0].tobytes()
    # 5 valid candidates + 1 padding row through the job encoder and the head; 34 machines once.
    rows_seen = [rows for rows, _ in layers]
    assert max(rows_seen) == 34 and rows_seen.count(6) >= 3 and 40 not in rows_seen and encoded() == [6]
    layers.clear()
    assert actors.logits(PLACER, feats).tobytes() == want[1].tobytes()
    # The placer's own six layers on the 34 machines; the same candidate rows again: the job
    # encoder computed none of them, the machine encoder no machine.
    assert [rows for rows, _ in layers].count(34) == 6 and encoded() == []
    # One candidate row changes: the job encoder sees that row only, and the bits still agree.
    moved = {**feats, "jobs": feats["jobs"].copy()}
    moved["jobs"][2, 5] += 0.25
    want_moved = _full(actors, ORDERER, moved)
    layers.clear()
    assert actors.logits(ORDERER, moved).tobytes() == want_moved.tobytes()
    assert encoded() == [1]
    # One machine changes: the machine encoder sees that row only, and the bits still agree.
    feats2 = {**feats, "machines": feats["machines"].copy()}
    feats2["machines"][7] += 0.25
    want2 = _full(actors, ORDERER, feats2)
    layers.clear()
    assert actors.logits(ORDERER, feats2).tobytes() == want2.tobytes()
    assert (1, 13) in layers and 34 not in [rows for rows, _ in layers]
    # Padding rows that differ (not the observation's zeros): every row is computed, same bits.
    odd = {**feats, "jobs": feats["jobs"].copy()}
    odd["jobs"][-1, 3] = 0.5
    want_odd = _full(actors, ORDERER, odd)
    layers.clear()
    assert actors.logits(ORDERER, odd).tobytes() == want_odd.tobytes()
    assert 40 in [rows for rows, _ in layers]


def test_masked_actions_are_not_scored_and_the_allowed_ones_keep_their_bits(monkeypatch):
    policy, actors, rng, feats, want = _shipped_case(1, valid=12)
    order_mask = np.zeros(41, bool)
    order_mask[[1, 4, 7]] = True                  # three candidates; advance forbidden
    place_mask = np.zeros(35, bool)
    place_mask[[0, 5, 33, 34]] = True             # three machines and the no-op
    for agent, mask in ((ORDERER, order_mask), (PLACER, place_mask)):
        got = portable.portable_actors(policy.model).logits(agent, feats, mask)
        assert got[mask].tobytes() == want[agent][mask].tobytes()
        assert np.isneginf(got[~mask]).all()
    _interpreted(monkeypatch)
    real, layers = portable._dense, []

    def counting(x, wt, b, act):
        layers.append(x.shape)
        return real(x, wt, b, act)
    monkeypatch.setattr(portable, "_dense", counting)
    fresh = portable.portable_actors(policy.model)
    got = fresh.logits(ORDERER, feats, order_mask)
    assert got[order_mask].tobytes() == want[ORDERER][order_mask].tobytes()
    # The job head's three layers on the three allowed rows (inputs: embedding and summary), the
    # advance head not at all.
    assert [shape for shape in layers if shape[0] == 3] == [(3, 128), (3, 64), (3, 64)]
    assert (1, 64) in layers and layers.count((1, 64)) == 1 + 2   # the gate and the squeeze's last two
    layers.clear()
    got = fresh.logits(PLACER, feats, place_mask)
    assert got[place_mask].tobytes() == want[PLACER][place_mask].tobytes()
    # Every machine through the encoder (their mean is the head's context), three through the head.
    assert [rows for rows, _ in layers] .count(34) == 3 and [rows for rows, _ in layers].count(3) == 3
