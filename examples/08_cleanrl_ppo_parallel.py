"""A single-file, CleanRL-style PPO for the parallel env, batched (parameter sharing, action masks).

Everything is in this file: the batched vector env (``cluster_env.vector.ClusterVectorEnv``: N
copies of the parallel env stepped together, stacked arrays, no per-agent dicts), a small
actor-critic in torch, rollouts, GAE and the clipped PPO update. The two agents take turns: each
step only the agent whose phase it is decides, so a rollout is one chain of decisions per env
copy; the vector env takes that acting agent's action (``Discrete(A)``, the larger of the two
action spaces) and gives its mask (``obs["action_mask"]``), and one shared network learns both
roles (the phase is ``global[0]`` of its flat observation). Invalid actions are impossible:
logits outside the mask are set to -inf. Episodes that end are reset in the same step.

At the end the trained policy (argmax) is scored on full test episodes next to two mask-only
references on the same seeds, FIFO + first-fit (the lowest allowed action) and random, and the
script says how its short run compares and what a real run costs.

Needs the ``rl`` extra (torch). A bare run takes a few minutes on one core::

    python examples/08_cleanrl_ppo_parallel.py --total-timesteps 20000
"""
from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402

from cluster_env.vector import ClusterVectorEnv  # noqa: E402


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--scenario", default="philly-v0")
    p.add_argument("--total-timesteps", type=int, default=20_000, help="decisions, all env copies together")
    p.add_argument("--num-envs", type=int, default=4)
    p.add_argument("--num-steps", type=int, default=128, help="decisions per env copy per rollout")
    p.add_argument("--jobs-per-episode", type=int, default=200, help="jobs per training episode")
    p.add_argument("--lr", type=float, default=3e-4)
    p.add_argument("--gamma", type=float, default=1.0, help="episodes are finite")
    p.add_argument("--gae-lambda", type=float, default=0.95)
    p.add_argument("--update-epochs", type=int, default=4)
    p.add_argument("--num-minibatches", type=int, default=4)
    p.add_argument("--clip-coef", type=float, default=0.2)
    p.add_argument("--ent-coef", type=float, default=0.01)
    p.add_argument("--vf-coef", type=float, default=0.5)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--eval-seeds", type=int, default=3, help="evaluate on test seeds 0 .. N-1")
    p.add_argument("--eval-jobs", type=int, default=200, help="jobs per evaluation episode")
    return p.parse_args(argv)


class Agent(nn.Module):
    """Actor and critic on the flat observation; the mask is applied to the logits."""

    def __init__(self, obs_size: int, n_actions: int, hidden: int) -> None:
        super().__init__()
        self.critic = nn.Sequential(nn.Linear(obs_size, hidden), nn.Tanh(), nn.Linear(hidden, hidden), nn.Tanh(),
                                    nn.Linear(hidden, 1))
        self.actor = nn.Sequential(nn.Linear(obs_size, hidden), nn.Tanh(), nn.Linear(hidden, hidden), nn.Tanh(),
                                   nn.Linear(hidden, n_actions))

    @staticmethod
    def _squash(x: torch.Tensor) -> torch.Tensor:
        return torch.sign(x) * torch.log1p(torch.abs(x))     # features span several orders of magnitude

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        return self.critic(self._squash(obs)).squeeze(-1)

    def act(self, obs: torch.Tensor, mask: torch.Tensor, action: "torch.Tensor | None" = None):
        x = self._squash(obs)
        logits = self.actor(x).masked_fill(~mask, -1e9)
        dist = torch.distributions.Categorical(logits=logits)
        if action is None:
            action = dist.sample()
        return action, dist.log_prob(action), dist.entropy(), self.critic(x).squeeze(-1)


def evaluate(policy, scenario: str, seeds: range, jobs: int) -> list[float]:
    """avg JCT (seconds) of one full test episode per seed, all seeds together in one vector env;
    ``policy(flat_obs, masks, rng) -> actions`` for the whole batch."""
    vec = ClusterVectorEnv(len(seeds), scenario, "test", jobs_per_episode=jobs)
    obs, _ = vec.reset(seed=list(seeds))
    rng = np.random.default_rng(seeds.start)
    scores: list = [None] * len(seeds)
    while any(s is None for s in scores):
        actions = policy(vec.flat_observations(), obs["action_mask"].astype(bool), rng)
        obs, _, _, _, infos = vec.step(actions)
        if "final_info" in infos:                # envs whose episode ended (then reset: ignored)
            for i in np.flatnonzero(infos["_final_info"]):
                if scores[i] is None:
                    scores[i] = float(infos["final_info"]["metrics"]["avg_jct"][i])
    return scores


def main(argv=None) -> dict:
    args = parse_args(argv)
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    vec = ClusterVectorEnv(args.num_envs, args.scenario, "train", jobs_per_episode=args.jobs_per_episode)
    size, n_act = vec.layout.size, vec.n_actions
    agent = Agent(size, n_act, args.hidden)
    optim = torch.optim.Adam(agent.parameters(), lr=args.lr, eps=1e-5)
    T, N = args.num_steps, args.num_envs
    obs_b = torch.zeros(T, N, size)
    mask_b = torch.zeros(T, N, n_act, dtype=torch.bool)
    act_b, logp_b, rew_b, done_b, val_b = (torch.zeros(T, N) for _ in range(5))
    obs, _ = vec.reset(seed=args.seed)                   # env i gets seed + i
    cur_done = torch.zeros(N)
    returns, episode_ret = [], np.zeros(N)
    iterations = max(1, args.total_timesteps // (T * N))
    t0 = time.perf_counter()
    for it in range(iterations):
        for t in range(T):
            vec.flat_observations(out=obs_b[t].numpy())      # written straight into the rollout buffer
            mask_b[t], done_b[t] = torch.from_numpy(obs["action_mask"].astype(bool)), cur_done
            with torch.no_grad():
                action, logp, _, value = agent.act(obs_b[t], mask_b[t])
            act_b[t], logp_b[t], val_b[t] = action.float(), logp, value
            obs, rewards, terms, truncs, _ = vec.step(action.numpy())
            rew_b[t] = torch.from_numpy(rewards)
            episode_ret += rewards
            done = terms | truncs
            for i in np.flatnonzero(done):
                returns.append(episode_ret[i])
                episode_ret[i] = 0.0
            cur_done = torch.from_numpy(done.astype(np.float32))
        cur_obs = vec.flat_observations()
        with torch.no_grad():                    # GAE over each env copy's chain of decisions
            next_value = agent.value(torch.from_numpy(cur_obs))
            adv = torch.zeros(T, N)
            last = torch.zeros(N)
            for t in reversed(range(T)):
                nonterminal = 1.0 - (cur_done if t == T - 1 else done_b[t + 1])
                nv = next_value if t == T - 1 else val_b[t + 1]
                delta = rew_b[t] + args.gamma * nv * nonterminal - val_b[t]
                last = delta + args.gamma * args.gae_lambda * nonterminal * last
                adv[t] = last
            ret = adv + val_b
        b_obs, b_mask = obs_b.reshape(T * N, size), mask_b.reshape(T * N, n_act)
        b_act, b_logp, b_adv, b_ret = (x.reshape(-1) for x in (act_b, logp_b, adv, ret))
        mb = max(1, (T * N) // args.num_minibatches)
        for _ in range(args.update_epochs):
            perm = torch.randperm(T * N)
            for start in range(0, T * N, mb):
                idx = perm[start:start + mb]
                _, logp, entropy, value = agent.act(b_obs[idx], b_mask[idx], b_act[idx].long())
                ratio = (logp - b_logp[idx]).exp()
                a = b_adv[idx]
                a = (a - a.mean()) / (a.std() + 1e-8)
                pg = torch.max(-a * ratio, -a * ratio.clamp(1 - args.clip_coef, 1 + args.clip_coef)).mean()
                loss = pg + args.vf_coef * ((value - b_ret[idx]) ** 2).mean() - args.ent_coef * entropy.mean()
                optim.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(agent.parameters(), 0.5)
                optim.step()
        recent = f"{np.mean(returns[-10:]):.2f}" if returns else "n/a (no episode finished yet)"
        print(f"iteration {it + 1}/{iterations}: {(it + 1) * T * N} decisions, "
              f"mean return of the last episodes {recent}, {time.perf_counter() - t0:.0f} s", flush=True)
    train_s = time.perf_counter() - t0

    def ppo(obs, mask, rng):
        with torch.no_grad():
            logits = agent.actor(Agent._squash(torch.from_numpy(obs)))
        return torch.argmax(logits.masked_fill(~torch.from_numpy(mask), -1e9), dim=1).numpy()

    def random(obs, mask, rng):
        return np.array([rng.choice(np.flatnonzero(m)) for m in mask])

    seeds = range(args.eval_seeds)
    scores = {"ppo (this run)": evaluate(ppo, args.scenario, seeds, args.eval_jobs),
              "fifo+first-fit": evaluate(lambda o, m, r: np.argmax(m, axis=1), args.scenario, seeds, args.eval_jobs),
              "random": evaluate(random, args.scenario, seeds, args.eval_jobs)}
    print(f"\n{args.scenario} / test, {len(seeds)} seeds x {args.eval_jobs} jobs: mean avg JCT (hours)")
    for name, values in scores.items():
        print(f"  {name:<16} {np.mean(values) / 3600:8.2f}")
    ours, fifo = np.mean(scores["ppo (this run)"]), np.mean(scores["fifo+first-fit"])
    verdict = "beats" if ours < fifo else "does not beat yet"
    print(f"\nThis short run ({iterations * T * N:,} decisions, {train_s:.0f} s of training) {verdict} FIFO "
          f"({ours / fifo:.2f}x its avg JCT). A real run is a few hundred thousand decisions: about "
          f"{train_s / max(iterations * T * N, 1) * 300_000 / 60:.0f} minutes at this speed "
          f"(--total-timesteps 300000); compare with every baseline by `cluster-bench run --scenario {args.scenario}`.")
    return {k: float(np.mean(v)) for k, v in scores.items()}


if __name__ == "__main__":
    main()
