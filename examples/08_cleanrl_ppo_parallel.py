"""A single-file, CleanRL-style PPO for the parallel env, batched (parameter sharing, action masks).

Everything is in this file: the batched vector env (``cluster_env.vector.ClusterVectorEnv``: N
copies of the parallel env stepped together, stacked arrays, no per-agent dicts), a small
actor-critic in torch, rollouts, GAE and the clipped PPO update. The two agents take turns: each
step only the agent whose phase it is decides, so a rollout is one chain of decisions per env
copy; the vector env takes that acting agent's action (``Discrete(A)``, the larger of the two
action spaces) and gives its mask (``obs["action_mask"]``), and one shared network learns both
roles (the phase is ``global[0]`` of its flat observation). Invalid actions are impossible:
logits outside the mask are set to -inf. Episodes that end are reset in the same step.

At the end the trained actor (a torch module from the flat observation to logits, greedy over the
allowed actions) is saved with ``baselines.save_agent`` (``--out``/agent.zip, TorchScript, and the
settings it must be scored with beside it) and scored by the harness next to baselines on the same
test windows (``baselines.score_agent``: paired ratios to FIFO with 95% intervals); the script
says how its short run compares, what a real run costs, and the ``cluster-bench run`` line that
scores the saved file next to every baseline.

Needs the ``rl`` extra (torch). A bare run takes a few minutes on one core::

    python examples/08_cleanrl_ppo_parallel.py --total-timesteps 20000
"""
from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

from cluster_env.extras import exit_without_extra  # noqa: E402

# Without the rl extra: one line naming it, not a ModuleNotFoundError traceback.
exit_without_extra("rl", "examples/08_cleanrl_ppo_parallel.py", ("torch",))

import numpy as np  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402

import baselines  # noqa: E402
import baselines.trained  # noqa: E402
from baselines import BASELINE_NAMES  # noqa: E402
from baselines.harness.report import paired_verdict  # noqa: E402
from cluster_env import DEFAULT_SCENARIO  # noqa: E402
from cluster_env.vector import ClusterVectorEnv  # noqa: E402


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--scenario", default=DEFAULT_SCENARIO)
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
    p.add_argument("--eval-seeds", type=int, default=3, help="score on test windows 0 .. N-1")
    p.add_argument("--eval-jobs", type=int, default=200, help="jobs per scored episode (0: the scenario's windows)")
    p.add_argument("--baselines", default="fifo,random,las", help="comma-separated baselines scored next to it")
    p.add_argument("--out", default="runs/cleanrl_ppo", help="folder for agent.zip and agent.agent.json")
    return p.parse_args(argv)


class Squash(nn.Module):
    """sign(x) log(1 + |x|): the features span several orders of magnitude."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sign(x) * torch.log1p(torch.abs(x))


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
        return Squash()(x)

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        return self.critic(self._squash(obs)).squeeze(-1)

    def act(self, obs: torch.Tensor, mask: torch.Tensor, action: "torch.Tensor | None" = None):
        x = self._squash(obs)
        logits = self.actor(x).masked_fill(~mask, -1e9)
        dist = torch.distributions.Categorical(logits=logits)
        if action is None:
            action = dist.sample()
        return action, dist.log_prob(action), dist.entropy(), self.critic(x).squeeze(-1)


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

    # What is saved and scored: the actor as one module from the flat observation to logits.
    policy = nn.Sequential(Squash(), agent.actor)
    path = baselines.save_agent(policy, Path(args.out) / "agent.zip", vec, label="cleanrl-ppo")
    print(f"\nsaved the policy (TorchScript) to {path}, its settings to {baselines.trained.sidecar_path(path)}")
    env_kwargs = {"jobs_per_episode": args.eval_jobs} if args.eval_jobs else None
    names = [n for n in args.baselines.split(",") if n]
    # A TorchScript file runs its program when loaded: trusted here because this script just wrote it.
    score = baselines.score_agent(str(path), policies=names, seeds=range(args.eval_seeds), env_kwargs=env_kwargs,
                                  backend="serial", trust_model=True)
    jobs = f"{args.eval_jobs} jobs" if args.eval_jobs else "the scenario's windows"
    print(f"{args.scenario} / test, {args.eval_seeds} windows x {jobs}, paired with the baselines:\n{score}")
    ratio = next(r for r in score.summary if r["policy"] == score.agent)["ratio_avg_jct"]
    # Paired with the scenario's yardstick; no verdict below 10 distinct windows (the default is 3).
    print(f"\nThis short run ({iterations * T * N:,} decisions, {train_s:.0f} s of training), paired with "
          f"{score.reference}:\n{paired_verdict(score.records, score.agent, score.reference)}\n"
          f"A real run is a few hundred thousand decisions: about "
          f"{train_s / max(iterations * T * N, 1) * 300_000 / 60:.0f} minutes at this speed "
          f"(--total-timesteps 300000). Score the saved policy next to every baseline on full windows "
          f"(--trust-model: loading TorchScript runs its program; give it for your own files only):\n"
          f"  cluster-bench run --trust-model --scenario {args.scenario} --policies {','.join(BASELINE_NAMES)},{path}")
    return {"path": str(path), "ratio_avg_jct": float(ratio), "records": score.records}


if __name__ == "__main__":
    main()
