"""Train sb3-contrib's MaskablePPO on the flat single-agent view and compare it with the scenario's
yardstick, FIFO and random.

One policy makes both decisions (which job next, which machine) on
``cluster_env/HeteroClusterFlat-v1`` (card: ``cluster_env/wrappers/flat.py``). It trains on the
scenario's ``train`` split and is then evaluated, deterministic, on full episodes of the ``test``
split (one per seed) next to references played by the harness (``baselines.evaluate``) on the
same windows:

* the scenario's yardstick (``baselines.yardstick.yardstick(scenario)``: its strongest
  duration-blind rule, the reference of every ``cluster-bench`` table);
* ``fifo``:   the oldest pending job that fits, placed first-fit;
* ``random``: a uniformly random allowed action for both agents.

One column each. (Without the ``baselines`` package the example plays ``fifo`` and ``random``
itself, by the flat view's masks. It used to print both kinds of ``random`` column, and they
disagreed: the rule is the same, but the harness's policy draws its orders and placements from two
generators spawned from the seed and the example's from one, so they are two samples of a random
policy, not one score.)

Progress: every tenth of the budget a line gives the steps, the seconds and, before any training
episode has finished (a 1,000-job episode is thousands of steps per env), how far the running
episodes are (the shares of their jobs arrived and finished, from the observation's
``arrivals_left`` and ``finished_frac``) and their return so far; then the mean return of the
finished episodes too.

The policy (``--policy rows``, see :func:`rows_policy_class`) scores every candidate job and every
machine with shared weights and is work-conserving (it never chooses ``advance`` while a job may
start, as FIFO). Training uses the env's reward unchanged, ``gamma = 1`` (episodes are finite;
discounting per decision step would pay an agent for creating extra steps) and full-size
training episodes (``--jobs-per-episode 1000``: the heavy, queueing windows are what the test
split scores).

Needs the ``rl`` extra (torch, stable-baselines3, sb3-contrib). Small defaults so that a bare run
finishes in a few minutes; a real run is::

    python examples/03_train_maskable_ppo.py --scenario philly-v0 --timesteps 400000 --max-train-minutes 10 --out runs/ppo
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402

from cluster_env import DEFAULT_SCENARIO  # noqa: E402
from cluster_env.extras import exit_without_extra  # noqa: E402


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--scenario", default=DEFAULT_SCENARIO)
    p.add_argument("--timesteps", type=int, default=20_000, help="training steps (all envs together)")
    p.add_argument("--max-train-minutes", type=float, default=None,
                   help="stop training after this wall time even if --timesteps is not reached")
    p.add_argument("--n-envs", type=int, default=8, help="training envs")
    p.add_argument("--subprocess", action="store_true", help="SubprocVecEnv instead of DummyVecEnv")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--eval-seeds", type=int, default=5, help="evaluate on seeds 0 .. N-1")
    p.add_argument("--eval-split", default="test", choices=["train", "validation", "test"])
    p.add_argument("--eval-jobs", type=int, default=None,
                   help="jobs per evaluation episode (default: the scenario's)")
    p.add_argument("--jobs-per-episode", type=int, default=1000, help="jobs per training episode")
    p.add_argument("--n-steps", type=int, default=256, help="rollout length per env")
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--n-epochs", type=int, default=4)
    p.add_argument("--gamma", type=float, default=1.0,
                   help="1: episodes are finite, and discounting per decision step (not per second) would reward "
                   "an agent for creating extra steps (advancing while jobs fit) before costly periods")
    p.add_argument("--gae-lambda", type=float, default=0.95)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--ent-coef", type=float, default=0.001)
    p.add_argument("--policy", default="rows", choices=["rows", "mlp"],
                   help="rows: shared per-job / per-machine scorers (see RowsExtractor); mlp: SB3's MlpPolicy")
    p.add_argument("--hidden", type=int, default=64, help="hidden size of the rows policy")
    p.add_argument("--work-conserving", action=argparse.BooleanOptionalAction, default=True,
                   help="rows policy: never choose advance while a job may start (a constraint of the policy, "
                   "like FIFO's; the env still allows it)")
    p.add_argument("--net-arch", default="64,64", help="hidden sizes of the MLP policy and value nets")
    p.add_argument("--reward-scale", type=float, default=1.0,
                   help="training reward multiplier (the env's return is minus the average JCT in hours)")
    p.add_argument("--threads", type=int, default=1, help="torch threads")
    p.add_argument("--out", default=None, help="folder for model.zip and results.json")
    p.add_argument("--quiet", action="store_true")
    p.add_argument("--verbose", type=int, default=0, help="SB3 verbosity (1 prints the training statistics)")
    return p.parse_args(argv)


def rows_policy_class():
    """MaskablePPO policy that scores every candidate job and every machine with shared weights.

    The flat observation (``cluster_env/envs/flat_layout.py``) is cut back into its job rows,
    machine rows and global / placing vectors. A context vector (global + placing features) is
    appended to every row; one small MLP scores each job row (ORDER actions ``0 .. K+R-1``), another
    each machine row (PLACE actions ``0 .. M-1``), a third ``advance`` (action ``K+R``) from the
    context and the pooled job rows. The phase (``global[0]``) selects which scores are the
    logits; with ``work_conserving`` the advance logit is -1e8 whenever the mask (read from the
    observation) allows a job, so the policy never idles GPUs a job could use. Near the random
    policy advancing looks no worse than starting a job (the random policy delays jobs anyway) and
    PPO drifts towards idling; the constraint removes that trap. The critic has its own encoder of the same shape and reads the context and the pooled
    rows (sharing it let the value loss drown the policy gradient). Same weights for every row:
    the policy learns "which job" and "which machine" rules, not positions.
    """
    import torch as th
    from sb3_contrib.common.maskable.policies import MaskableActorCriticPolicy
    from torch import nn

    class RowsEncoder(nn.Module):
        """Context vector, per-job and per-machine embeddings of a batch of flat observations."""

        def __init__(self, segments: dict, hidden: int) -> None:
            super().__init__()
            self.seg = segments
            (self.nj, fj), (self.nm, fm) = segments["jobs"][2], segments["machines"][2]
            ng, npl = segments["global"][2][0], segments["placing"][2][0]
            h = hidden
            self.ctx = nn.Sequential(nn.Linear(ng + npl, h), nn.ReLU())
            self.job_enc = nn.Sequential(nn.Linear(fj + h, h), nn.ReLU(), nn.Linear(h, h), nn.ReLU())
            self.mach_enc = nn.Sequential(nn.Linear(fm + h, h), nn.ReLU(), nn.Linear(h, h), nn.ReLU())

        def forward(self, x):
            def part(name):
                a, b, shape = self.seg[name]
                return x[:, a:b].reshape(x.shape[0], *shape)

            jobs, machines, g = part("jobs"), part("machines"), part("global")
            ctx = self.ctx(th.cat([g, part("placing")], dim=1))
            je = self.job_enc(th.cat([jobs, ctx[:, None].expand(-1, self.nj, -1)], dim=2))
            me = self.mach_enc(th.cat([machines, ctx[:, None].expand(-1, self.nm, -1)], dim=2))
            valid = jobs[:, :, :1]
            jpool = (je * valid).sum(1) / valid.sum(1).clamp(min=1.0)
            return g[:, :1], ctx, je, me, jpool, me.mean(1)

    class RowsExtractor(nn.Module):
        """Actor: per-row scores -> logits; critic: its own encoder, pooled -> value features."""

        def __init__(self, segments: dict, n_actions: int, hidden: int, work_conserving: bool) -> None:
            super().__init__()
            h = hidden
            a, b, _ = segments["action_mask"]
            self.mask_slice, self.work_conserving = slice(a, b), work_conserving
            self.actor, self.critic_enc = RowsEncoder(segments, h), RowsEncoder(segments, h)
            self.nj, self.nm, self.n_actions = self.actor.nj, self.actor.nm, n_actions
            self.job_score = nn.Linear(h, 1)
            self.mach_score = nn.Linear(h, 1)
            self.adv_score = nn.Sequential(nn.Linear(2 * h, h), nn.ReLU(), nn.Linear(h, 1))
            self.critic = nn.Sequential(nn.Linear(3 * h, h), nn.ReLU())
            self.latent_dim_pi, self.latent_dim_vf = n_actions, h

        def forward_actor(self, x):
            phase, ctx, je, me, jpool, _ = self.actor(x)
            b = x.shape[0]
            order = th.zeros(b, self.n_actions, device=x.device)
            order[:, : self.nj] = self.job_score(je).squeeze(2)
            adv = self.adv_score(th.cat([ctx, jpool], dim=1)).squeeze(1)
            if self.work_conserving:   # never idle while a job may start (or be preempted): mask segment
                can_start = x[:, self.mask_slice][:, : self.nj].amax(dim=1) > 0.5
                adv = th.where(can_start, th.full_like(adv, -1e8), adv)
            order[:, self.nj] = adv
            place = th.zeros(b, self.n_actions, device=x.device)
            place[:, : self.nm] = self.mach_score(me).squeeze(2)
            return phase * place + (1 - phase) * order

        def forward_critic(self, x):
            _, ctx, _, _, jpool, mpool = self.critic_enc(x)
            return self.critic(th.cat([ctx, jpool, mpool], dim=1))

        def forward(self, x):
            return self.forward_actor(x), self.forward_critic(x)

    class RowsPolicy(MaskableActorCriticPolicy):
        def __init__(self, *args, segments=None, hidden=64, work_conserving=True, **kwargs):
            self.segments, self.hidden, self.work_conserving = segments, hidden, work_conserving
            super().__init__(*args, **kwargs)

        def _build_mlp_extractor(self) -> None:
            self.mlp_extractor = RowsExtractor(self.segments, int(self.action_space.n), self.hidden,
                                               self.work_conserving)

        def _build(self, lr_schedule) -> None:
            super()._build(lr_schedule)
            self.action_net = nn.Identity()             # the extractor's output already is the logits
            for head in (self.mlp_extractor.job_score, self.mlp_extractor.mach_score,
                         self.mlp_extractor.adv_score[-1]):
                nn.init.orthogonal_(head.weight, gain=0.01)
                nn.init.zeros_(head.bias)
            self.optimizer = self.optimizer_class(self.parameters(), lr=lr_schedule(1), **self.optimizer_kwargs)

        def _get_constructor_parameters(self):
            return {**super()._get_constructor_parameters(), "segments": self.segments, "hidden": self.hidden,
                    "work_conserving": self.work_conserving}

    return RowsPolicy


def layout_segments(scenario: str) -> dict:
    """``{name: (start, stop, shape)}`` of the flat view's observation (for the rows policy)."""
    from cluster_env.wrappers import HeteroClusterFlatEnv

    layout = HeteroClusterFlatEnv(scenario, "train").layout
    return {k: (layout.slice(k).start, layout.slice(k).stop, layout.shapes[k]) for k in layout.shapes}


def make_training_env(args):
    from stable_baselines3.common.vec_env import VecEnvWrapper

    from cluster_env.wrappers import make_vec_env

    class VecScaleReward(VecEnvWrapper):
        def __init__(self, venv, scale):
            super().__init__(venv)
            self.scale = scale

        def reset(self):
            return self.venv.reset()

        def step_wait(self):
            obs, rew, done, infos = self.venv.step_wait()
            return obs, rew * self.scale, done, infos

    vec = make_vec_env("flat", args.n_envs, args.scenario, "train", seed=args.seed, subprocess=args.subprocess,
                       jobs_per_episode=args.jobs_per_episode)
    return VecScaleReward(vec, args.reward_scale) if args.reward_scale != 1.0 else vec


def progress_columns(scenario: str) -> tuple[int, int]:
    """The flat observation's columns of ``arrivals_left`` (jobs not yet arrived / jobs of the
    episode) and ``finished_frac`` (finished jobs / jobs of the episode)."""
    from cluster_env.envs.observation import GLOBAL_FEATURES
    from cluster_env.wrappers import HeteroClusterFlatEnv

    start = HeteroClusterFlatEnv(scenario, "train").layout.slice("global").start
    return start + GLOBAL_FEATURES.index("arrivals_left"), start + GLOBAL_FEATURES.index("finished_frac")


def progress_line(steps: int, seconds: float, finished_returns: list, arrived, finished, running_return) -> str:
    """One progress line: the finished episodes' mean return, else that none has finished yet, and
    where the running episodes are (shares of their jobs arrived and finished, return so far)."""
    n = len(arrived)
    done = (f"mean episode return {np.mean(finished_returns):.3f} (last {len(finished_returns)} episodes)"
            if finished_returns else "no training episode finished yet")
    return (f"  {steps:>9,} steps {seconds:>6.0f} s  {done}; the {n} running episode{'s' * (n != 1)}: "
            f"{100 * float(np.mean(arrived)):.0f}% of their jobs arrived, {100 * float(np.mean(finished)):.0f}% "
            f"finished, return so far {float(np.mean(running_return)):.3f}")


def progress_callback(every: int, quiet: bool, max_seconds: float | None, columns: tuple[int, int],
                      reward_scale: float = 1.0):
    """Prints steps, seconds, the mean return of the finished training episodes (minus the average
    JCT in hours, from SB3's Monitor, unscaled) and the progress of the running ones; stops
    training once ``max_seconds`` of wall time have passed."""
    from stable_baselines3.common.callbacks import BaseCallback

    class Progress(BaseCallback):
        def _on_training_start(self) -> None:
            self.t0, self.next = time.perf_counter(), every
            self.running_return = np.zeros(self.training_env.num_envs)
            self.arrived = self.finished = np.zeros(self.training_env.num_envs)

        def _on_step(self) -> bool:
            self.running_return += np.asarray(self.locals["rewards"], dtype=float) / reward_scale
            obs = np.asarray(self.locals["new_obs"])
            self.arrived, self.finished = 1.0 - obs[:, columns[0]], obs[:, columns[1]]
            self.running_return[np.asarray(self.locals["dones"], dtype=bool)] = 0.0   # a new episode starts
            if max_seconds is not None and time.perf_counter() - self.t0 >= max_seconds:
                return False
            if not quiet and every and self.num_timesteps >= self.next:
                self.next += every
                print(progress_line(self.num_timesteps, time.perf_counter() - self.t0,
                                    [e["r"] for e in self.model.ep_info_buffer], self.arrived, self.finished,
                                    self.running_return), flush=True)
            return True

    return Progress()


def run_episode(env, choose, seed: int) -> dict:
    """One episode of a flat view with ``choose(obs, mask) -> action``; returns the final metrics."""
    obs, info = env.reset(seed=seed)
    done = False
    while not done:
        obs, _, term, trunc, info = env.step(choose(obs, env.action_masks()))
        done = term or trunc
    return info["metrics"]


def evaluate(args, model=None) -> dict:
    """The model's average JCT per test window and the references' on the same windows: the
    scenario's yardstick, ``fifo`` and ``random`` by the harness (one column each), or, without the
    ``baselines`` package, ``fifo`` and ``random`` played here by the flat view's masks."""
    from cluster_env.wrappers import HeteroClusterFlatEnv

    overrides = {} if args.eval_jobs is None else {"jobs_per_episode": args.eval_jobs}
    env = HeteroClusterFlatEnv(args.scenario, args.eval_split, **overrides)
    seeds = list(range(args.eval_seeds))
    choosers = {}
    if model is not None:
        choosers["ppo"] = lambda seed: (
            lambda obs, mask: int(model.predict(obs, action_masks=mask, deterministic=True)[0]))
    harness = importlib.util.find_spec("baselines") is not None     # the project's harness, when installed
    if not harness:
        choosers["random"] = lambda seed: (
            lambda rng: (lambda obs, mask: int(rng.choice(np.flatnonzero(mask)))))(np.random.default_rng(seed))
        choosers["fifo"] = lambda seed: (lambda obs, mask: int(np.argmax(mask)))
    results = {}
    for name, factory in choosers.items():
        per_seed = [run_episode(env, factory(s), s)["avg_jct"] for s in seeds]
        results[name] = {"avg_jct_per_seed": per_seed, "mean_avg_jct": float(np.mean(per_seed))}
    references, yard = [n for n in ("random", "fifo") if n in results], None
    if harness:
        import baselines
        from baselines.yardstick import yardstick

        yard = yardstick(args.scenario)
        references = list(dict.fromkeys((yard, "fifo", "random")))
        for name in references:
            records = baselines.evaluate(name, args.scenario, split=args.eval_split, seeds=seeds,
                                         env_kwargs=overrides, backend="serial")
            per_seed = [r["avg_jct"] for r in records]
            results[name] = {"avg_jct_per_seed": per_seed, "mean_avg_jct": float(np.mean(per_seed))}
    return {"seeds": seeds, "split": args.eval_split, "references": references, "yardstick": yard, **results}


def main(argv=None) -> dict:
    args = parse_args(argv)
    # Without the rl extra: one line naming it, not a ModuleNotFoundError traceback.
    exit_without_extra("rl", "examples/03_train_maskable_ppo.py", ("torch", "stable_baselines3", "sb3_contrib"))
    import torch

    torch.set_num_threads(args.threads)
    from sb3_contrib import MaskablePPO

    vec = make_training_env(args)
    if args.policy == "rows":
        policy, policy_kwargs = rows_policy_class(), {"segments": layout_segments(args.scenario),
                                                      "hidden": args.hidden, "work_conserving": args.work_conserving}
    else:
        policy, policy_kwargs = "MlpPolicy", {"net_arch": [int(x) for x in args.net_arch.split(",") if x]}
    model = MaskablePPO(policy, vec, n_steps=args.n_steps, batch_size=args.batch_size, n_epochs=args.n_epochs,
                        gamma=args.gamma, gae_lambda=args.gae_lambda, learning_rate=args.lr, ent_coef=args.ent_coef,
                        policy_kwargs=policy_kwargs, seed=args.seed, device="cpu", verbose=args.verbose)
    t0 = time.perf_counter()
    max_seconds = None if args.max_train_minutes is None else 60.0 * args.max_train_minutes
    progress = progress_callback(max(args.timesteps // 10, 1), args.quiet, max_seconds,
                                 progress_columns(args.scenario), args.reward_scale)
    model.learn(args.timesteps, callback=progress)
    train_wall = time.perf_counter() - t0
    vec.close()
    result = {"scenario": args.scenario, "timesteps": int(model.num_timesteps), "train_wall_s": round(train_wall, 1),
              "args": vars(args), **evaluate(args, model)}
    seeds, yard = result["seeds"], result["yardstick"]
    names = ["ppo", *result["references"]]
    heads = {n: f"{n} (yardstick)" if n == yard else n for n in names}
    width = max(16, *(len(h) for h in heads.values()))
    print(f"MaskablePPO on {args.scenario} (flat view): {result['timesteps']:,} steps in {train_wall:.0f} s; "
          f"average JCT (s) on the {args.eval_split} split, deterministic policy:")
    print(f"  {'seed':>6} " + " ".join(f"{heads[n]:>{width}}" for n in names))
    for i, s in enumerate(seeds):
        print(f"  {s:>6} " + " ".join(f"{result[n]['avg_jct_per_seed'][i]:>{width},.0f}" for n in names))
    print(f"  {'mean':>6} " + " ".join(f"{result[n]['mean_avg_jct']:>{width},.0f}" for n in names))
    best = min(result["references"], key=lambda n: result[n]["mean_avg_jct"])
    ratio = result["ppo"]["mean_avg_jct"] / result[best]["mean_avg_jct"]
    if yard is not None:
        print(f"\nppo's average JCT is {result['ppo']['mean_avg_jct'] / result[yard]['mean_avg_jct']:.2f}x that of "
              f"{yard}, the scenario's yardstick (its strongest duration-blind rule).")
    per_step = train_wall / max(result["timesteps"], 1)
    # A ratio of means on a few windows is no verdict: that is paired, on 10 distinct windows or more
    # (baselines.harness.stats.MIN_VERDICT_WINDOWS; cluster-bench compare prints it).
    judged = f"({'better' if ratio < 1 else 'not better yet'})" if len(seeds) >= 10 else \
        f"(on {len(seeds)} windows: no verdict, which needs 10 distinct windows, paired)"
    print(f"\nThis run: ppo's average JCT is {ratio:.2f}x that of {best}, the best reference here "
          f"{judged}. A real run is 400,000 steps: about "
          f"{per_step * 400_000 / 60:.0f} minutes at this run's speed (the recorded one: --timesteps 400000 "
          "--max-train-minutes 10).")
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        if importlib.util.find_spec("baselines") is not None:
            # The model and, beside it, the settings it must be scored with (scenario, the view's rule
            # for forbidden actions, the algorithm): one cluster-bench line then scores it.
            import baselines
            from cluster_env.wrappers import HeteroClusterFlatEnv

            baselines.save_agent(model, out / "model.zip", HeteroClusterFlatEnv(args.scenario, "train"))
        else:
            model.save(out / "model.zip")
        (out / "results.json").write_text(json.dumps(result, indent=2))
        # The rows policy is a class of this script, stored pickled in the zip: loading it runs that code.
        trust = ("--trust-model ", " (--trust-model: the rows policy is code of this script, stored in the zip; "
                 "give it for your own files only)") if args.policy == "rows" else ("", "")
        print(f"model and results written to {out}/; score the model next to every baseline{trust[1]}:\n"
              f"  cluster-bench run {trust[0]}--scenario {args.scenario} --policies "
              f"fifo,sjf,tiresias,las,{out / 'model.zip'}")
    return result


if __name__ == "__main__":
    main(sys.argv[1:])
