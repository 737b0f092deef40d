"""Does plain PPO (no action masks) learn on the flat view with its default arguments?

Trains SB3's ``PPO("MlpPolicy", gymnasium.make("cluster_env/HeteroClusterFlat-v1", ...))`` and
prints, per rollout, the fraction of forbidden actions it took (each replaced by the lowest allowed
one at a penalty, the default) and
its mean reward per step (a random unmasked policy first, as the reference). Learning
to pick allowed actions is the first thing the safe defaults make possible.

Usage::

    python benchmarks/plain_ppo_flat.py --timesteps 20480 --jobs-per-episode 200
"""
from __future__ import annotations

import argparse
import os
import time
import warnings

os.environ.setdefault("OMP_NUM_THREADS", "1")

import gymnasium  # noqa: E402
import numpy as np  # noqa: E402

import cluster_env  # noqa: E402,F401


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--timesteps", type=int, default=20_480)
    p.add_argument("--n-steps", type=int, default=2048)
    p.add_argument("--jobs-per-episode", type=int, default=200)
    # philly-v0: the scenario of the README's recorded figures (the views now default to philly-v1).
    p.add_argument("--scenario", default="philly-v0")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    import torch
    from stable_baselines3 import PPO
    from stable_baselines3.common.callbacks import BaseCallback

    torch.set_num_threads(1)

    class Count(BaseCallback):
        def __init__(self):
            super().__init__()
            self.invalid, self.rewards, self.rows = 0, [], []

        def _on_step(self) -> bool:
            self.invalid += sum(bool(i.get("invalid_action")) for i in self.locals["infos"])
            self.rewards.extend(self.locals["rewards"].tolist())
            return True

        def _on_rollout_end(self) -> None:
            n = max(len(self.rewards), 1)
            self.rows.append((self.num_timesteps, self.invalid / n, float(np.mean(self.rewards))))
            self.invalid, self.rewards = 0, []

    env = gymnasium.make("cluster_env/HeteroClusterFlat-v1", scenario=args.scenario,
                         jobs_per_episode=args.jobs_per_episode)
    rng = np.random.default_rng(args.seed)
    env.reset(seed=args.seed)
    invalid = 0
    for _ in range(args.n_steps):
        _, _, term, trunc, info = env.step(int(rng.integers(env.action_space.n)))
        invalid += bool(info.get("invalid_action"))
        if term or trunc:
            env.reset()
    print(f"random unmasked actions: {invalid / args.n_steps:.0%} forbidden")
    count = Count()
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*infinity.*")
        model = PPO("MlpPolicy", env, n_steps=args.n_steps, batch_size=256, seed=args.seed, device="cpu")
        model.learn(args.timesteps, callback=count)
    print(f"plain PPO, {args.timesteps:,} steps in {time.perf_counter() - t0:.0f} s "
          f"(philly-v0 train, {args.jobs_per_episode} jobs an episode):")
    print(f"  {'steps':>8}  {'forbidden':>9}  {'reward/step':>11}")
    for steps, frac, reward in count.rows:
        print(f"  {steps:>8,}  {frac:>9.0%}  {reward:>11.4f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
