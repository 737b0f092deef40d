"""A single-file, CleanRL-style PPO for the PettingZoo parallel env (parameter sharing, action masks).

Everything is in this file: the flat parallel env (``cluster_env.wrappers.flat_parallel_env``:
both agents see the same flat Box observation with their own mask and a one-hot agent id, and
share one ``Discrete(A)`` action space), a small actor-critic in torch, rollouts over a few env
copies, GAE and the clipped PPO update. The two agents take turns: each step only the agent whose
phase it is decides (the other one's mask allows only its no-op), so a rollout is one chain of
decisions per env copy and one shared network learns both roles. Invalid actions are impossible:
logits outside the mask are set to -inf.

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

import cluster_env  # noqa: E402
from cluster_env.wrappers import flat_parallel_env  # noqa: E402


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


def acting_agent(env) -> str:
    return "placer" if env.env.phase == 1 else "orderer"


def joint(env, agent: str, action: int) -> dict:
    """The acting agent's action and the other agent's no-op (its only allowed action)."""
    masks = env.action_masks()
    return {a: (action if a == agent else int(np.flatnonzero(masks[a])[0])) for a in env.possible_agents}


def evaluate(policy, scenario: str, seeds: range, jobs: int) -> list[float]:
    """avg JCT (seconds) of full test episodes; ``policy(obs, mask, rng) -> action`` of the acting agent."""
    out = []
    for seed in seeds:
        env = flat_parallel_env(scenario, "test", jobs_per_episode=jobs)
        obs, _ = env.reset(seed=seed)
        rng = np.random.default_rng(seed)
        while env.agents:
            agent = acting_agent(env)
            action = policy(obs[agent], env.action_masks()[agent], rng)
            obs, *_ = env.step(joint(env, agent, action))
        out.append(env.metrics()["avg_jct"])
    return out


def main(argv=None) -> dict:
    args = parse_args(argv)
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    envs = [flat_parallel_env(args.scenario, "train", jobs_per_episode=args.jobs_per_episode)
            for _ in range(args.num_envs)]
    size, n_act = envs[0].layout.size, envs[0].n_actions
    agent = Agent(size, n_act, args.hidden)
    optim = torch.optim.Adam(agent.parameters(), lr=args.lr, eps=1e-5)
    T, N = args.num_steps, args.num_envs
    obs_b = torch.zeros(T, N, size)
    mask_b = torch.zeros(T, N, n_act, dtype=torch.bool)
    act_b, logp_b, rew_b, done_b, val_b = (torch.zeros(T, N) for _ in range(5))
    cur_obs = np.zeros((N, size), np.float32)
    cur_mask = np.zeros((N, n_act), bool)
    for i, env in enumerate(envs):
        obs, _ = env.reset(seed=args.seed + i)
        a = acting_agent(env)
        cur_obs[i], cur_mask[i] = obs[a], env.action_masks()[a]
    cur_done = torch.zeros(N)
    returns, episode_ret = [], np.zeros(N)
    iterations = max(1, args.total_timesteps // (T * N))
    t0 = time.perf_counter()
    for it in range(iterations):
        for t in range(T):
            obs_b[t], mask_b[t], done_b[t] = torch.from_numpy(cur_obs), torch.from_numpy(cur_mask), cur_done
            with torch.no_grad():
                action, logp, _, value = agent.act(obs_b[t], mask_b[t])
            act_b[t], logp_b[t], val_b[t] = action.float(), logp, value
            for i, env in enumerate(envs):
                who = acting_agent(env)
                obs, rewards, terms, truncs, _ = env.step(joint(env, who, int(action[i])))
                rew_b[t, i] = rewards[who]
                episode_ret[i] += rewards[who]
                done = terms[who] or truncs[who]
                if done:
                    returns.append(episode_ret[i])
                    episode_ret[i] = 0.0
                    obs, _ = env.reset()
                who = acting_agent(env)
                cur_obs[i], cur_mask[i] = obs[who], env.action_masks()[who]
                cur_done[i] = float(done)
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
        return int(torch.argmax(logits.masked_fill(~torch.from_numpy(mask), -1e9)))

    seeds = range(args.eval_seeds)
    scores = {"ppo (this run)": evaluate(ppo, args.scenario, seeds, args.eval_jobs),
              "fifo+first-fit": evaluate(lambda o, m, r: int(np.flatnonzero(m)[0]), args.scenario, seeds,
                                         args.eval_jobs),
              "random": evaluate(lambda o, m, r: int(r.choice(np.flatnonzero(m))), args.scenario, seeds,
                                 args.eval_jobs)}
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
