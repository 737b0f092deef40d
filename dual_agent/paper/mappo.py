"""MAPPO training of the dual agent: decentralised actors, a centralised critic, one shared reward.

Each iteration:

1. the rollout workers play whole episodes with the current weights (sampling), in subprocesses;
2. the critic values every state; GAE turns the shared reward into advantages;
3. a few epochs of the clipped PPO objective on shuffled minibatches: only the acting agent's
   decision enters its loss (the idle agent's no-op is not a decision), plus an entropy bonus
   and the critic's value loss; heuristic halves (ablations) are not trained;
4. a CSV log row (and TensorBoard, when installed); ``last.pt`` for resuming; every
   ``eval_every`` iterations the deterministic agent is scored on validation episodes and the
   best one is kept as ``best.pt``.

Episode seeds and minibatch order derive from the run's seed and the iteration, so a resumed
run continues exactly as the uninterrupted one would (tested).
"""
from __future__ import annotations

import csv
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import numpy as np
import dual_agent._torch  # noqa: F401  (without torch: an ImportError that names the extra)
import torch
from torch.distributions import Categorical

from baselines.harness.files import atomic_write, open_append
from dual_agent.paper.checkpoint import load_checkpoint, save_checkpoint, train_state
from dual_agent.paper.config import DualAgentConfig, TrainConfig
from dual_agent.paper.networks import masked_logits
from dual_agent.paper.packing import gather_rows, packed_chunks, packed_order_mask, renumber
from dual_agent.paper.policy import DualAgentPolicy, build_model, required_env, spaces_signature
from dual_agent.paper.prior import add_prior_bonus
from dual_agent.paper.rollout import NETWORK_FIELDS, Rollout, RolloutWorkers, make_env

LOG_COLUMNS = ("iteration", "timesteps", "wall_s", "steps_per_s", "episodes", "episode_return", "train_avg_jct",
               "policy_loss", "value_loss", "entropy_orderer", "entropy_placer", "approx_kl", "clip_frac", "learned_frac",
               "adv_abs", "val_avg_jct", "teacher_agree")


@dataclass
class TrainResult:
    """Where a training run left its files, and its last figures."""

    out_dir: Path
    iterations: int
    timesteps: int
    wall_s: float
    best_val_avg_jct: Optional[float]
    best_path: Path
    last_path: Path


class MAPPOTrainer:
    """Train a :class:`DualAgentConfig` agent with :class:`TrainConfig` into ``out_dir``.

    Args:
        train: the run's hyper-parameters and scenario.
        agent: the architecture (and which halves are learned).
        out_dir: receives ``last.pt``, ``best.pt``, ``log.csv`` and ``config.json``.
        subprocess: collect rollouts in worker processes (False: in this process, same numbers).
        tensorboard: also write TensorBoard scalars when ``tensorboard`` is installed.
    """

    def __init__(self, train: TrainConfig, agent: DualAgentConfig = DualAgentConfig(),
                 out_dir: "str | Path" = "runs/dual", subprocess: bool = True, tensorboard: bool = True) -> None:
        torch.set_num_threads(1)
        self.train_cfg, self.agent_cfg = train, agent
        self.out_dir = Path(out_dir)
        self.subprocess = subprocess
        _check_agent_env(agent)
        env_settings = {**train.env_kwargs, **required_env(agent)}
        _check_teacher(train.imitate, env_settings)
        if train.teacher is not None:
            _check_hindsight_env(env_settings)
        probe = make_env(train.scenario, train.split, env_settings, train.jobs_per_episode)
        self.spaces = spaces_signature(probe)
        torch.manual_seed(train.seed)
        self.device = resolve_device(train.device)
        self.model = build_model(agent, self.spaces).to(self.device)
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=train.learning_rate, eps=1e-5)
        self.iteration, self.timesteps, self.wall_s = 0, 0, 0.0
        self.best: Optional[float] = None
        self.log: list[dict] = []
        self._tb = _tensorboard(self.out_dir) if tensorboard else None

    # ----------------------------------------------------------------- resume
    @classmethod
    def resume(cls, path: "str | Path", out_dir: "Optional[str | Path]" = None, timesteps: Optional[int] = None,
               dagger_iterations: Optional[int] = None, **kwargs: Any) -> "MAPPOTrainer":
        """Continue a run from its ``last.pt`` (optionally with a new total ``timesteps``, or
        ``dagger_iterations``: a run stopped in its DAgger phase goes on with reinforcement
        learning from its imitation weights when this is the iterations it completed)."""
        data = load_checkpoint(path)
        state = train_state(data)
        train = TrainConfig.from_dict(state["config"], where=f"{path}: field train.config")
        for key, value in (("timesteps", timesteps), ("dagger_iterations", dagger_iterations)):
            if value is not None:
                train = TrainConfig.from_dict({**train.to_dict(), key: value}, where=f"--{key.replace('_', '-')}")
        agent = DualAgentConfig.from_dict(data["config"], where=f"{path}: field config")
        self = cls(train, agent, out_dir or Path(path).parent, **kwargs)
        if data["spaces"] != self.spaces:
            raise ValueError(f"{path}: made for other spaces than {train.scenario} has now")
        for field, load, value in (("model", self.model.load_state_dict, data["model"]),
                                   ("train.optimizer", self.optimizer.load_state_dict, state["optimizer"])):
            try:
                load(value)
            except (RuntimeError, ValueError, KeyError, TypeError, IndexError) as exc:
                first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                raise ValueError(f"{path}: field {field} does not fit the networks of its config ({first})") from None
        self.iteration, self.timesteps, self.wall_s = state["iteration"], state["timesteps"], state["wall_s"]
        self.best = state["best"]
        self.log = [dict(row) for row in state["log"]]
        return self

    # ----------------------------------------------------------------- loop
    def train(self, progress: bool = True, max_minutes: Optional[float] = None,
              max_iterations: Optional[int] = None) -> TrainResult:
        """Train until ``timesteps`` (or the wall-time / iteration limit); returns the result."""
        cfg = self.train_cfg
        self.out_dir.mkdir(parents=True, exist_ok=True)
        config = json.dumps({"train": cfg.to_dict(), "agent": self.agent_cfg.to_dict(), "spaces": self.spaces},
                            indent=2)
        atomic_write(self.out_dir / "config.json", lambda f: f.write(config))
        if self.iteration == 0:  # a fresh run starts a fresh log
            (self.out_dir / "log.csv").unlink(missing_ok=True)
            if self.best is None:   # and leaves no agent of a run before it to be taken for its own
                for name in ("best.pt", "last.pt"):
                    (self.out_dir / name).unlink(missing_ok=True)
        else:                    # a resumed one: the checkpoint's log is the truth, rows after it go
            self._rewrite_log()
        if 0 < self.iteration < cfg.dagger_iterations and getattr(self, "_aggregate", None) is None:
            raise ValueError(f"this run stopped in its DAgger phase (iteration {self.iteration} of "
                             f"{cfg.dagger_iterations}), whose aggregate is not saved: resume after it, or restart")
        bar = _progress(progress, cfg.timesteps, self.timesteps)
        start, done_iters = time.perf_counter(), 0
        workers = self._make_collector()
        if self.iteration == 0 and cfg.eval_every and self.agent_cfg.prior is not None and self.best is None:
            # A residual policy starts as its heuristic: score that start, so that best.pt is never
            # a checkpoint that validates worse than the untrained agent (the heuristic itself).
            self.best = self.evaluate()
            self.save(self.out_dir / "best.pt", with_train=False)
            row = {k: None for k in LOG_COLUMNS}
            row.update(iteration=0, timesteps=0, wall_s=0.0, val_avg_jct=self.best)
            self.log.append(row)
            self._write_log(row)
        try:
            while self.timesteps < cfg.timesteps:
                if max_iterations is not None and done_iters >= max_iterations:
                    break
                if max_minutes is not None and time.perf_counter() - start > 60.0 * max_minutes:
                    break
                t0 = time.perf_counter()
                if self.iteration < cfg.dagger_iterations:
                    rollout, stats = self._dagger_iteration()
                else:
                    imitating = self.iteration < cfg.imitate_iterations
                    rollout = self._collect(workers, imitating)
                    stats = self.update(rollout, imitation=imitating)
                self.iteration += 1
                self.timesteps += len(rollout)
                self.wall_s += time.perf_counter() - t0
                row = self._log_row(rollout, stats, time.perf_counter() - t0)
                if cfg.eval_every and self.iteration % cfg.eval_every == 0:
                    row["val_avg_jct"] = self.evaluate()
                    if self.best is None or row["val_avg_jct"] < self.best:
                        self.best = row["val_avg_jct"]
                        self.save(self.out_dir / "best.pt", with_train=False)
                self.log.append(row)
                # The checkpoint first: a crash between the two loses only the CSV row, which a
                # resume rewrites from the checkpoint's log (a row first duplicated the iteration).
                self.save(self.out_dir / "last.pt")
                self._write_log(row)
                done_iters += 1
                if bar is not None:
                    bar.update(len(rollout))
                    bar.set_postfix(ret=f"{row['episode_return']:.2f}", val=_fmt(self.best))
        finally:
            workers.close()
            if getattr(self, "_dagger_pool", None) is not None:
                self._dagger_pool.close()
                self._dagger_pool = None
            if bar is not None:
                bar.close()
            if self._tb is not None:
                self._tb.flush()
        if not (self.out_dir / "best.pt").exists():  # no evaluation ran: the last weights are the best known
            self.save(self.out_dir / "best.pt", with_train=False)
        return TrainResult(self.out_dir, self.iteration, self.timesteps, self.wall_s, self.best,
                           self.out_dir / "best.pt", self.out_dir / "last.pt")

    # ----------------------------------------------------------------- DAgger
    def teachers(self) -> list:
        """The hindsight teachers of the run's training windows (computed once, cached in
        ``teacher_file`` or ``<run folder>/teachers.json``; :mod:`dual_agent.paper.teacher`)."""
        if getattr(self, "_teachers", None) is None:
            from dual_agent.paper.teacher import teacher_schedules

            cfg = self.train_cfg
            path = Path(cfg.teacher_file) if cfg.teacher_file else self.out_dir / "teachers.json"
            t0 = time.perf_counter()
            self._teachers = teacher_schedules(cfg.scenario, range(cfg.teacher_windows), cfg.teacher_episodes,
                                               cfg.jobs_per_episode, cfg.env_kwargs, path)
            gains = [w.value / w.best_rule_value for w in self._teachers]
            print(f"hindsight teachers: {len(self._teachers)} training windows ({path}), best-known / best rule "
                  f"= {float(np.exp(np.mean(np.log(gains)))):.3f} (geometric mean), {time.perf_counter() - t0:.1f} s")
        return self._teachers

    def _dagger_iteration(self) -> tuple[Rollout, dict]:
        """One DAgger iteration (:mod:`dual_agent.paper.dagger`): play, label, aggregate, imitate."""
        from dual_agent.paper.batched import EpisodeSpec
        from dual_agent.paper.dagger import Aggregate, DaggerWorkers, dagger_beta, dagger_rollout, imitation_update
        from dual_agent.paper.rollout import episode_seed
        from dual_agent.paper.teacher import HindsightTeacher

        cfg, i = self.train_cfg, self.iteration
        teachers = self.teachers()
        if getattr(self, "_dagger_env", None) is None:   # the episodes play one after another: one env
            kw = {**cfg.env_kwargs, **required_env(self.agent_cfg)}
            self._dagger_env = make_env(cfg.scenario, cfg.split, kw, cfg.jobs_per_episode)
            self._aggregate = Aggregate(cfg.dagger_max_samples, self._dagger_env.unwrapped.builder.R)
        picks = [teachers[(i * cfg.dagger_episodes + e) % len(teachers)] for e in range(cfg.dagger_episodes)]
        specs = [EpisodeSpec(w.seed, episode_seed(cfg.seed, i, e, 1), e) for e, w in enumerate(picks)]
        beta, mix_seed = dagger_beta(i, cfg.dagger_decay), episode_seed(cfg.seed, i, 0, 2)
        if cfg.dagger_workers == 1:
            student = DualAgentPolicy(self.policy().model, self.agent_cfg, self.spaces, scenario=cfg.scenario,
                                      deterministic=True)
            labellers = [HindsightTeacher(w.schedule, cfg.scenario) for w in picks]
            data, played, counts = dagger_rollout(student, self._dagger_env, labellers, specs, beta, mix_seed)
        else:   # worker processes: each episode is a task, the results in episode order (the same rollout)
            if getattr(self, "_dagger_pool", None) is None:
                self._dagger_pool = DaggerWorkers(cfg.dagger_workers, cfg.scenario, cfg.split, cfg.env_kwargs,
                                                  cfg.jobs_per_episode, self.agent_cfg.to_dict(), self.spaces)
            state = {k: v.detach().cpu() for k, v in self.model.state_dict().items()}
            data, played, counts = self._dagger_pool.rollout(state, [w.schedule for w in picks], specs, beta, mix_seed)
        self._aggregate.add(data)
        stats = imitation_update(self, self._aggregate.steps(), cfg.dagger_epochs, cfg.minibatch, (cfg.seed, i))
        stats["teacher_agree"] = counts["agree"] / counts["student"] if counts["student"] else None
        stats["learned_frac"] = counts["labelled"] / max(1, counts["env_steps"])
        return Rollout({"reward": np.zeros(counts["env_steps"])}, played), stats

    # ----------------------------------------------------------------- collection
    def _make_collector(self) -> Any:
        """What plays the rollouts (closed after training): MAPPO's worker processes."""
        cfg = self.train_cfg
        return RolloutWorkers(cfg.n_envs if cfg.n_envs > 0 else 1, self.subprocess and cfg.n_envs > 0,
                              cfg.scenario, cfg.split, cfg.env_kwargs, cfg.jobs_per_episode,
                              self.agent_cfg.to_dict(), self.spaces)

    def _collect(self, workers: Any, imitating: bool) -> Rollout:
        """One iteration's rollout (a teacher plays while ``imitating``)."""
        cfg = self.train_cfg
        state = {k: v.detach().cpu() for k, v in self.model.state_dict().items()}
        return workers.collect(state, cfg.seed, self.iteration, cfg.steps_per_worker,
                               teacher=cfg.imitate if imitating else None)

    def _uses_critic(self) -> bool:
        """Whether the critic is trained and its values enter the advantages (GAE)."""
        return True

    def _advantages(self, rollout: Rollout, values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(advantages, critic targets) per step: GAE on the critic's values."""
        cfg = self.train_cfg
        adv = torch.from_numpy(gae(rollout.steps["reward"], rollout.steps["done"], values.cpu().numpy(),
                                   cfg.gamma, cfg.gae_lambda)).to(self.device)
        return adv, adv + values

    # ----------------------------------------------------------------- PPO
    def update(self, rollout: Rollout, imitation: bool = False) -> dict[str, float]:
        """GAE, then the clipped objective for ``epochs`` over shuffled minibatches.

        The actors are evaluated only on learned decisions (each agent on its own steps), the
        critic on every step: forced moves and the idle agent's no-ops cost no actor compute.
        With ``imitation`` (a teacher played the rollout) the actors' loss is the cross-entropy
        of the teacher's decisions instead, and the critic learns the teacher's values.
        """
        cfg, dev = self.train_cfg, self.device
        critic = self._uses_critic() or imitation
        batch = {k: torch.from_numpy(rollout.steps[k]).to(dev) for k in NETWORK_FIELDS}
        agent = torch.from_numpy(rollout.steps["agent"].astype(np.int64)).to(dev)
        action = torch.from_numpy(rollout.steps["action"]).to(dev)
        learned = torch.from_numpy(rollout.steps["learned"]).to(dev)
        with torch.no_grad():
            values = (torch.cat([self._values({k: v[idx] for k, v in batch.items()})
                                 for idx in _chunks(len(rollout), 2048, device=dev)])
                      if critic else torch.zeros(len(rollout), device=dev))
            old_logp = torch.zeros(len(rollout), device=dev)
            for idx in ([] if imitation else _chunks(len(rollout), 2048, device=dev)):  # imitation needs no ratio
                idx = idx[learned[idx]]
                old_logp[idx] = self._logp_entropy({k: v[idx] for k, v in batch.items()}, agent[idx], action[idx])[0]
        if imitation:   # the critic learns the teacher's values (GAE), whatever the algorithm
            adv, returns = MAPPOTrainer._advantages(self, rollout, values)
        else:
            adv, returns = self._advantages(rollout, values)
        if learned.sum() > 1:
            learned_adv = adv[learned]
            adv = (adv - learned_adv.mean()) / (learned_adv.std() + 1e-8)
        rng = np.random.default_rng([cfg.seed, self.iteration])
        sums = {"policy_loss": 0.0, "value_loss": 0.0, "approx_kl": 0.0, "clip_frac": 0.0}
        ent = {0: [0.0, 0], 1: [0.0, 0]}
        n_mb = 0
        self.model.train()
        # Without a critic only the learned decisions enter the loss: the minibatches are drawn from
        # them alone (a placer-only agent decides about 5% of the steps; shuffling every step gave
        # hundreds of minibatches of a few decisions each).
        pool = np.arange(len(rollout)) if critic else np.flatnonzero(rollout.steps["learned"])
        for _ in range(cfg.epochs):
            for idx in _chunks(len(pool), cfg.minibatch, pool[rng.permutation(len(pool))], device=dev):
                if critic:
                    value_loss = ((self._values({k: v[idx] for k, v in batch.items()}) - returns[idx]) ** 2).mean()
                    loss = cfg.value_coef * value_loss
                else:       # no critic: nothing to fit (its weights stay as they are)
                    value_loss = loss = torch.zeros((), device=dev)
                act = idx[learned[idx]]
                if len(act):
                    logp, entropy = self._logp_entropy({k: v[act] for k, v in batch.items()}, agent[act], action[act])
                    if imitation:
                        policy_loss = -logp.mean()
                    else:
                        ratio = torch.exp(logp - old_logp[act])
                        a = adv[act]
                        policy_loss = -torch.min(ratio * a, ratio.clamp(1 - cfg.clip, 1 + cfg.clip) * a).mean()
                    loss = loss + policy_loss - cfg.entropy_coef * entropy.mean()
                if not loss.requires_grad:   # no learned decision and no critic in this minibatch
                    continue
                self.optimizer.zero_grad()
                loss.backward()
                torch.nn.utils.clip_grad_norm_(self.model.parameters(), cfg.max_grad_norm)
                self.optimizer.step()
                sums["value_loss"] += float(value_loss.detach())
                if len(act):
                    with torch.no_grad():
                        sums["policy_loss"] += float(policy_loss)
                        if not imitation:  # KL and clipping are PPO's; 0 in the log while imitating
                            sums["approx_kl"] += float(((ratio - 1) - (logp - old_logp[act])).mean())
                            sums["clip_frac"] += float(((ratio - 1).abs() > cfg.clip).float().mean())
                        for who in (0, 1):
                            sel = agent[act] == who
                            ent[who][0] += float(entropy[sel].sum())
                            ent[who][1] += int(sel.sum())
                n_mb += 1
        self.model.eval()
        out = {k: v / max(1, n_mb) for k, v in sums.items()}
        out["entropy_orderer"] = ent[0][0] / max(1, ent[0][1])
        out["entropy_placer"] = ent[1][0] / max(1, ent[1][1])
        out["learned_frac"] = float(learned.float().mean())
        out["adv_abs"] = float(adv[learned].abs().mean()) if learned.any() else 0.0
        return out

    def _logp_entropy(self, sub: dict, agent: torch.Tensor, action: torch.Tensor
                      ) -> tuple[torch.Tensor, torch.Tensor]:
        """Log-probability and entropy of the acting agent's decision, per step.

        Each actor runs only on its own steps: the orderer on ORDER steps, the orderer's summary
        and the placer on PLACE steps. With a prior, its bonus is added to the recorded prior
        action of each step, as when acting. The candidate rows are packed
        (:mod:`dual_agent.paper.packing`): the padded layout's numbers to float round-off.
        """
        n = len(agent)
        bonus = self.agent_cfg.prior_bonus if self.agent_cfg.prior is not None else 0.0
        logp, entropy = torch.zeros(n, device=agent.device), torch.zeros(n, device=agent.device)
        order, place = (agent == 0).nonzero().squeeze(1), (agent == 1).nonzero().squeeze(1)
        if len(order):
            jobs, mask, act, prior = (sub["jobs"][order], sub["order_mask"][order], action[order],
                                      sub["prior"][order])
            for idx, rows, position in packed_chunks(jobs, mask, act, prior):
                width = rows.shape[1]
                logits, _ = self.model.orderer(gather_rows(jobs[idx], rows), sub["machines"][order[idx]],
                                               sub["global"][order[idx]])
                logits = add_prior_bonus(logits, renumber(prior[idx], position, width), bonus)
                dist = Categorical(logits=masked_logits(logits, packed_order_mask(mask[idx], rows)))
                logp = logp.index_copy(0, order[idx], dist.log_prob(renumber(act[idx], position, width)))
                entropy = entropy.index_copy(0, order[idx], dist.entropy())
        if len(place):
            summary = self._summaries(sub["jobs"][place], sub["machines"][place], sub["global"][place])
            logits = self.model.placer(sub["machines"][place], sub["placing"][place], summary.detach())
            logits = add_prior_bonus(logits, sub["prior"][place], bonus)
            dist = Categorical(logits=masked_logits(logits, sub["place_mask"][place]))
            logp = logp.index_copy(0, place, dist.log_prob(action[place]))
            entropy = entropy.index_copy(0, place, dist.entropy())
        return logp, entropy

    def _summaries(self, jobs: torch.Tensor, machines: torch.Tensor, glob: torch.Tensor) -> torch.Tensor:
        """The orderer's set summaries (B, H) of steps, valid rows packed."""
        out = None
        for idx, rows, _ in packed_chunks(jobs):
            summary = self.model.orderer.summarise(gather_rows(jobs[idx], rows), machines[idx], glob[idx])[2]
            out = summary.new_zeros((len(jobs), summary.shape[1])) if out is None else out
            out = out.index_copy(0, idx, summary)
        return out

    def _values(self, sub: dict) -> torch.Tensor:
        """The critic's values (B,) of steps, valid rows packed."""
        jobs = sub["jobs"]
        out = torch.zeros(len(jobs), device=jobs.device)
        for idx, rows, _ in packed_chunks(jobs):
            out = out.index_copy(0, idx, self.model.critic(gather_rows(jobs[idx], rows), sub["machines"][idx],
                                                            sub["global"][idx], sub["placing"][idx]))
        return out

    # ----------------------------------------------------------------- evaluation and files
    def policy(self, deterministic: bool = True) -> DualAgentPolicy:
        """The current agent as a harness policy (shares the weights; a CPU copy when training on
        another device, since a policy acts on numpy arrays)."""
        model = self.model
        if self.device.type != "cpu":
            model = build_model(self.agent_cfg, self.spaces)
            model.load_state_dict({k: v.detach().cpu() for k, v in self.model.state_dict().items()})
        return DualAgentPolicy(model, self.agent_cfg, self.spaces, scenario=self.train_cfg.scenario,
                               deterministic=deterministic)

    def evaluate(self, split: str = "validation", seeds: Optional[list[int]] = None) -> float:
        """Mean average JCT of the deterministic agent on the run's validation windows
        (:meth:`validation_windows`), or on ``split`` with ``seeds`` when either is given."""
        from baselines.harness.episode import run_episode

        if split == "validation" and seeds is None:
            windows = self.validation_windows()
        else:
            windows = [(split, s) for s in (range(self.train_cfg.eval_seeds) if seeds is None else seeds)]
        policy = self.policy()
        jcts = [run_episode(policy, self.train_cfg.scenario, w, s, dict(self.train_cfg.env_kwargs)).record["avg_jct"]
                for w, s in windows]
        return float(np.mean(jcts))

    def validation_windows(self) -> list[tuple[str, int]]:
        """The ``eval_seeds`` validation windows, (split, seed) each: matched to the test period's
        contention (``TrainConfig.validation="matched"``, :mod:`dual_agent.validation`; measured
        with LAS and :meth:`validation_placer`) or the validation split's seeds. The same for a
        resumed run (a function of the settings and the shipped file)."""
        if getattr(self, "_validation", None) is None:
            from dual_agent.validation import validation_set

            cfg = self.train_cfg
            self._validation = validation_set(cfg.validation, cfg.scenario, self.validation_placer(), cfg.eval_seeds,
                                              env_kwargs=cfg.env_kwargs, log=print)
        return list(self._validation.windows)

    def validation_placer(self) -> str:
        """The placer LAS measures contention with: the agent's heuristic placer half, else its
        prior's placer (``las+fastest`` -> ``fastest``), else ``consolidate``."""
        from baselines.registry import PLACERS

        if self.agent_cfg.placer in PLACERS:
            return self.agent_cfg.placer
        prior = self.agent_cfg.prior or ""
        tail = prior.partition("+")[2]
        return tail if tail in PLACERS else "consolidate"

    def save(self, path: "str | Path", with_train: bool = True) -> Path:
        train = None
        if with_train:
            train = {"config": self.train_cfg.to_dict(), "optimizer": self.optimizer.state_dict(),
                     "iteration": self.iteration, "timesteps": self.timesteps, "wall_s": self.wall_s,
                     "best": self.best, "log": [dict(r) for r in self.log]}
        return save_checkpoint(path, self.model, self.agent_cfg, self.spaces, self.train_cfg.scenario, train)

    def _log_row(self, rollout: Rollout, stats: dict, seconds: float) -> dict:
        eps = rollout.episodes
        row = {"iteration": self.iteration, "timesteps": self.timesteps, "wall_s": round(self.wall_s, 3),
               "steps_per_s": round(len(rollout) / max(seconds, 1e-9), 1), "episodes": len(eps),
               "episode_return": float(np.mean([e["return"] for e in eps])),
               "train_avg_jct": float(np.mean([e.get("avg_jct", np.nan) for e in eps])),
               **stats, "val_avg_jct": None}
        if self._tb is not None:
            for key, value in row.items():
                if key not in ("iteration", "timesteps") and value is not None:
                    self._tb.add_scalar(f"dual_agent/{key}", value, self.timesteps)
        return row

    def _rewrite_log(self) -> None:
        """``log.csv`` from the rows in memory (those of the checkpoint resumed from), atomically."""
        def write(fh) -> None:
            writer = csv.DictWriter(fh, fieldnames=LOG_COLUMNS)
            writer.writeheader()
            for row in self.log:
                writer.writerow({k: row.get(k) for k in LOG_COLUMNS})

        atomic_write(self.out_dir / "log.csv", write, newline="")

    def _write_log(self, row: dict) -> None:
        path = self.out_dir / "log.csv"
        new = not path.exists()
        with open_append(path, newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=LOG_COLUMNS)
            if new:
                writer.writeheader()
            writer.writerow({k: row.get(k) for k in LOG_COLUMNS})


def _check_agent_env(agent: DualAgentConfig) -> None:
    """The agent's own settings (``--agent-env``) may only be requirements of the scheduling
    interface: anything else would change the environment it is scored on (the harness refuses
    it there); the training environment is ``TrainConfig.env_kwargs`` (``--env``)."""
    from baselines.harness.episode import INTERFACE_KEYS

    other = sorted(set(agent.env_overrides) - INTERFACE_KEYS)
    if other:
        raise ValueError(f"the agent's env_overrides (--agent-env) may only set {sorted(INTERFACE_KEYS)}; "
                         f"{other} change the environment itself: give them as the training environment "
                         f"(TrainConfig.env_kwargs, --env KEY=VALUE)")


def _check_hindsight_env(env_settings: dict) -> None:
    """A hindsight teacher (LAS's rule, las-migrate's moves) acts with preemption and reads the
    running jobs' placements: the agent must see the same environment."""
    from baselines.migrate import MIGRATE_OBSERVATION

    if env_settings.get("preemption") is not True or env_settings.get("observation") != MIGRATE_OBSERVATION:
        raise ValueError(f"a hindsight teacher needs preemption=True and observation={MIGRATE_OBSERVATION!r} in the "
                         f"agent's environment (cluster-bench train: --agent-env preemption=True --observation "
                         f"{MIGRATE_OBSERVATION}); got preemption={env_settings.get('preemption')!r}, "
                         f"observation={env_settings.get('observation')!r}")


def _check_teacher(name: Optional[str], env_settings: dict) -> None:
    """A teacher must be able to act in the agent's environment (e.g. Tiresias needs preemption)."""
    if name is None:
        return
    from baselines.registry import make_policy

    for key, value in make_policy(name).env_overrides.items():
        if env_settings.get(key) != value:
            raise ValueError(f"teacher {name!r} needs {key}={value!r}; train the agent with that setting "
                             f"(--agent-env {key}={value!r})")


def gae(rewards: np.ndarray, dones: np.ndarray, values: np.ndarray, gamma: float, lam: float) -> np.ndarray:
    """Generalised advantage estimates over concatenated whole episodes (``dones`` ends each)."""
    adv = np.zeros(len(rewards), dtype=np.float32)
    last = 0.0
    for t in range(len(rewards) - 1, -1, -1):
        nonterminal = 0.0 if dones[t] else 1.0
        next_value = values[t + 1] if t + 1 < len(rewards) else 0.0
        delta = rewards[t] + gamma * next_value * nonterminal - values[t]
        last = delta + gamma * lam * nonterminal * last
        adv[t] = last
    return adv


def _chunks(n: int, size: int, order: Optional[np.ndarray] = None, device: "torch.device | str" = "cpu"):
    order = np.arange(n) if order is None else order
    for i in range(0, n, size):
        yield torch.from_numpy(order[i:i + size]).to(device)


def resolve_device(name: str) -> torch.device:
    """The torch device ``name``, or a ``ValueError`` that says why it cannot be used here."""
    device = torch.device(name)
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(f"device {name!r} is not available: this torch ({torch.__version__}) sees no CUDA GPU "
                             f"(torch.cuda.is_available() is False); train with --device cpu")
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise ValueError(f"device {name!r} is not available: {torch.cuda.device_count()} CUDA device(s)")
    elif device.type == "mps" and not (hasattr(torch.backends, "mps") and torch.backends.mps.is_available()):
        raise ValueError(f"device {name!r} is not available on this machine; train with --device cpu")
    return device


def _fmt(value: Optional[float]) -> str:
    return "-" if value is None else f"{value:,.0f}"


def _progress(enabled: bool, total: int, initial: int):
    if not enabled:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, initial=initial, unit="step", desc="dual-agent MAPPO")


def _tensorboard(out_dir: Path):
    try:
        from torch.utils.tensorboard import SummaryWriter
    except Exception:  # tensorboard not installed: CSV only
        return None
    return SummaryWriter(str(out_dir / "tb"))
