"""The update's packed re-evaluation (``dual_agent.paper.packing``): kept rows moved to the front
and chunked by length give the padded layout's log-probabilities, entropies, values and gradients
(to float round-off), with actions and the prior's row indices renumbered."""
from __future__ import annotations

import numpy as np
import torch
from torch.distributions import Categorical

from dual_agent import DualAgentConfig, TrainConfig
from dual_agent.paper.mappo import MAPPOTrainer
from dual_agent.paper.networks import masked_logits
from dual_agent.paper.packing import kept_rows, pack, packed_chunks, packed_order_mask, renumber
from dual_agent.paper.prior import add_prior_bonus
from dual_agent.paper.rollout import NETWORK_FIELDS


def test_pack_puts_kept_rows_first_and_renumbers_rows_advance_and_no_prior():
    # 2 steps, 5 rows; feature 0 is "valid". Step 0: rows 1 and 4 valid, row 2 allowed by the mask
    # only (kept too); step 1: row 3 named by an index only.
    jobs = torch.zeros(2, 5, 2)
    jobs[0, [1, 4], 0] = 1.0
    jobs[:, :, 1] = torch.arange(10, dtype=torch.float32).reshape(2, 5)
    mask = torch.zeros(2, 6, dtype=torch.bool)
    mask[0, [1, 2, 5]] = True
    action = torch.tensor([4, 3])
    keep = kept_rows(jobs, mask, action, torch.tensor([-1, 5]))
    assert keep.tolist() == [[False, True, True, False, True], [False, False, False, True, False]]
    order, position = pack(keep)
    assert order.shape == (2, 3) and order[0].tolist() == [1, 2, 4] and order[1, 0].item() == 3
    assert position[0].tolist() == [-1, 0, 1, -1, 2] and position[1].tolist() == [-1, -1, -1, 0, -1]
    width = order.shape[1]
    assert renumber(action, position, width).tolist() == [2, 0]
    assert renumber(torch.tensor([5, -1]), position, width).tolist() == [3, -1]     # advance, no prior
    assert packed_order_mask(mask, order)[0].tolist() == [True, True, False, True]
    # Chunks cover every step once, sorted by kept rows.
    seen = torch.cat([idx for idx, _, _ in packed_chunks(jobs, mask, action, size=1)])
    assert seen.tolist() == [1, 0]


def _padded(trainer, sub, agent, action):
    """The update's numbers on the full padded layout (what the trainer computed before packing)."""
    model, bonus = trainer.model, trainer.agent_cfg.prior_bonus
    logp, entropy = torch.zeros(len(agent)), torch.zeros(len(agent))
    o, p = (agent == 0).nonzero().squeeze(1), (agent == 1).nonzero().squeeze(1)
    logits, _ = model.orderer(sub["jobs"][o], sub["machines"][o], sub["global"][o])
    dist = Categorical(logits=masked_logits(add_prior_bonus(logits, sub["prior"][o], bonus), sub["order_mask"][o]))
    logp[o], entropy[o] = dist.log_prob(action[o]), dist.entropy()
    summary = model.orderer.summarise(sub["jobs"][p], sub["machines"][p], sub["global"][p])[2]
    logits = model.placer(sub["machines"][p], sub["placing"][p], summary.detach())   # as the trainer
    dist = Categorical(logits=masked_logits(add_prior_bonus(logits, sub["prior"][p], bonus), sub["place_mask"][p]))
    logp[p], entropy[p] = dist.log_prob(action[p]), dist.entropy()
    return logp, entropy, model.value(sub)


def test_packed_update_gives_the_padded_numbers_and_gradients(tmp_path):
    torch.set_num_threads(1)
    train = TrainConfig(scenario="philly-hetero-v2", algorithm="mappo", n_envs=0, steps_per_worker=1,
                        jobs_per_episode=30, timesteps=10_000, eval_every=0, seed=3, env_kwargs={"load": 1.5})
    agent_cfg = DualAgentConfig(prior="las+fastest", prior_bonus=2.0,
                                env_overrides={"preemption": True, "observation": "extended-v2"})
    trainer = MAPPOTrainer(train, agent_cfg, out_dir=tmp_path, subprocess=False, tensorboard=False)
    torch.manual_seed(0)
    with torch.no_grad():                      # weights far from initialisation: every logit matters
        for p in trainer.model.parameters():
            p.normal_(0.0, 0.3)
    rollout = trainer._collect(trainer._make_collector(), imitating=False)
    steps = rollout.steps
    valid = steps["jobs"][..., 0] > 0.5
    # The case packing exists for: padding, valid rows at both ends, orderer actions on running rows.
    assert valid.sum(1).max() < valid.shape[1] and valid[:, -1].any() and len(rollout) > 200
    sub = {k: torch.from_numpy(steps[k]) for k in NETWORK_FIELDS}
    agent = torch.from_numpy(steps["agent"].astype(np.int64))
    action = torch.from_numpy(steps["action"])
    assert ((agent == 0) & (action == valid.shape[1])).any()              # advance decisions

    got = trainer._logp_entropy(sub, agent, action) + (trainer._values(sub),)
    want = _padded(trainer, sub, agent, action)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, atol=2e-5, rtol=1e-5)

    def grads(numbers):
        trainer.model.zero_grad()
        (numbers[0].mean() + 0.1 * numbers[1].mean() + numbers[2].square().mean()).backward()
        return [p.grad.clone() for p in trainer.model.parameters() if p.grad is not None]

    g_packed = grads(trainer._logp_entropy(sub, agent, action) + (trainer._values(sub),))
    g_padded = grads(_padded(trainer, sub, agent, action))
    assert len(g_packed) == len(g_padded) > 10
    for a, b in zip(g_packed, g_padded):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-4)


def test_the_docs_quote_the_chunk_size():
    from pathlib import Path

    from dual_agent.paper.packing import CHUNK_STEPS

    text = " ".join((Path(__file__).parents[1] / "docs" / "dual_agent.md").read_text().split())
    assert f"cuts them into chunks of {CHUNK_STEPS} steps" in text
