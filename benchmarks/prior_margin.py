"""How far a residual dual agent (``--prior``) has moved from its heuristic.

Plays the deterministic agent on a few windows and, at every learned decision, compares the
network's logit of the heuristic's action with the best network logit among the other legal
actions. A decision is overturned only where that margin exceeds the prior's bonus; the figures
say how close training has come to changing any decision.

    python benchmarks/prior_margin.py runs/mine/last.pt [--scenario philly-hetero-v1]
        [--split validation] [--seeds 0,1] [--jobs-per-episode 300]
"""
from __future__ import annotations

import argparse
import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402


def margins(checkpoint: str, scenario: str, split: str, seeds: list[int], jobs: "int | None") -> tuple[np.ndarray, float]:
    """Per learned decision: best other network logit minus the prior action's; and the bonus."""
    import torch

    import cluster_env
    from dual_agent import DualAgentPolicy
    from dual_agent.paper.policy import ORDERER, joint_action, network_logits, required_env

    torch.set_num_threads(1)
    policy = DualAgentPolicy.load(checkpoint)
    if policy.config.prior is None:
        raise SystemExit(f"{checkpoint}: not a residual agent (its config has no prior)")
    kw = dict(required_env(policy.config))
    if jobs:
        kw["jobs_per_episode"] = jobs
    out = []
    for seed in seeds:
        env = cluster_env.parallel_env(scenario, split=split, **kw)
        obs, infos = env.reset(seed=seed)
        policy.reset(seed)
        while True:
            agent, action, learned, feats = policy.decide(obs, infos)
            if learned and feats["prior"] >= 0:
                mask = feats["order_mask"] if agent == ORDERER else feats["place_mask"]
                with torch.inference_mode():
                    batch = {k: torch.from_numpy(np.ascontiguousarray(feats[k])).unsqueeze(0)
                             for k in ("jobs", "machines", "global", "placing")}
                    logits = network_logits(policy.model, agent, batch)[0].double().numpy()
                other = mask.copy()
                other[feats["prior"]] = False
                if other.any():
                    out.append(float(logits[other].max() - logits[feats["prior"]]))
            obs, _, term, trunc, infos = env.step(joint_action(obs, agent, action))
            if term["orderer"] or trunc["orderer"]:
                break
    return np.asarray(out), float(policy.config.prior_bonus)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("checkpoint")
    p.add_argument("--scenario", default="philly-hetero-v1")
    p.add_argument("--split", default="validation")
    p.add_argument("--seeds", default="0,1")
    p.add_argument("--jobs-per-episode", type=int, default=300)
    args = p.parse_args()
    m, bonus = margins(args.checkpoint, args.scenario, args.split, [int(s) for s in args.seeds.split(",")],
                       args.jobs_per_episode)
    if not len(m):
        print("no learned decision with an alternative")
        return
    print(f"{len(m)} learned decisions; network margin of the best other action over the prior's: max "
          f"{m.max():.3f}, 99th percentile {np.percentile(m, 99):.3f}, median {np.median(m):.3f}; bonus "
          f"{bonus:g}; decisions overturned {int((m > bonus).sum())}")


if __name__ == "__main__":
    main()
