"""The dual agent as a policy: usable anywhere a baseline is (harness, CLI, examples).

:class:`DualAgentPolicy` follows the policy protocol of :mod:`baselines.policy`
(``reset(seed)``, ``act(observations, infos)``) and reads nothing but the observation, its masks
and the infos. Each step it refreshes the Random Walk GP from the measured machine speeds, then
the acting agent decides: the ordering agent in the ORDER phase, the placement agent (with the
ordering agent's summary of the queue) in the PLACE phase. Deterministic by default (arg max,
on logits computed by :mod:`dual_agent.paper.portable`: the same bits, hence the same episodes and
scores, on every CPU; ties go to the lowest index); ``deterministic=False`` samples from torch's
logits, which is how the training workers explore. With a ``prior``
heuristic in the config, the agent is a residual policy on it (:mod:`dual_agent.paper.prior`).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import numpy as np
import dual_agent._torch  # noqa: F401  (without torch: an ImportError that names the extra)
import torch

from baselines.obs import is_place_phase
from dual_agent.paper.config import LEARNED, DualAgentConfig
from dual_agent.paper.inference import actor_logits
from dual_agent.paper.masks import order_mask as order_mask_rules
from dual_agent.paper.checkpoint import CheckpointError, load_checkpoint, pretrained_path
# ORDERER, PLACER and network_logits are the networks'; importable from here as before the layout.
from dual_agent.paper.networks import GP_FEATURES, ORDERER, PLACER, DualAgentModel, network_logits  # noqa: F401
from dual_agent.paper.portable import masked_argmax, portable_logits
from dual_agent.paper.prior import NO_PRIOR, add_prior_bonus, make_prior, zero_output_layers


def feature_dims(spaces: dict) -> dict[str, int]:
    """Widths of the feature arrays from a spaces signature (see :func:`spaces_signature`)."""
    return {"job_dim": len(spaces["job_features"]), "machine_dim": len(spaces["machine_features"]),
            "global_dim": len(spaces["global_features"]), "placing_dim": len(spaces["placing_features"])}


def spaces_signature(env: Any) -> dict:
    """What a checkpoint must match: feature names and the sizes of the action spaces."""
    from cluster_env.envs.observation import GLOBAL_FEATURES, JOB_FEATURES, MACHINE_FEATURES, PLACING_FEATURES

    space = env.observation_space("orderer")
    builder = getattr(getattr(env, "unwrapped", env), "builder", None)
    # The extended layout (observation="extended") names its appended columns on its builder.
    jobs = getattr(builder, "job_features", JOB_FEATURES)
    glob = getattr(builder, "global_features", GLOBAL_FEATURES)
    return {"job_features": list(jobs), "machine_features": list(MACHINE_FEATURES),
            "global_features": list(glob), "placing_features": list(PLACING_FEATURES),
            "rows": int(space["jobs"].shape[0]), "machines": int(space["machines"].shape[0])}


def build_model(config: DualAgentConfig, spaces: dict) -> DualAgentModel:
    """Fresh networks for ``config``; with a prior, the actor heads' output layers start at zero."""
    model = DualAgentModel(hidden=config.hidden, **feature_dims(spaces))
    if config.prior is not None:
        zero_output_layers(model)
    return model


def policy_from_checkpoint(data: dict, **kwargs: Any) -> "DualAgentPolicy":
    """A :class:`DualAgentPolicy` from a loaded checkpoint dict (``kwargs`` go to the policy)."""
    where = data.get("path", "checkpoint")
    try:
        config = DualAgentConfig.from_dict(data["config"], where=f"{where}: field config")
    except ValueError as exc:                # names the file and the field itself
        raise CheckpointError(str(exc)) from None
    try:
        model = build_model(config, data["spaces"])
        model.load_state_dict(data["model"])
    except (TypeError, ValueError, KeyError, RuntimeError) as exc:
        raise CheckpointError(f"{where}: its networks do not match this dual_agent version: {exc}") from None
    return DualAgentPolicy(model, config, data["spaces"], scenario=data.get("scenario"), **kwargs)


class DualAgentPolicy:
    """The trained (or freshly initialised) dual agent.

    Args:
        model: the networks.
        config: their architecture and which halves are learned.
        spaces: the spaces signature the model was trained on (:func:`spaces_signature`); an
            environment whose observations differ is refused at the first step.
        scenario: the scenario it was trained on (informative; checked by :meth:`load`).
        deterministic: arg max (evaluation) or sampling.
        allow_transfer: accept another number of candidate rows or machines (the networks are
            size-agnostic); feature layouts must still match.
    """

    def __init__(self, model: DualAgentModel, config: DualAgentConfig, spaces: dict,
                 scenario: Optional[str] = None, deterministic: bool = True, allow_transfer: bool = False,
                 name: str = "dual") -> None:
        self.model, self.config, self.spaces, self.scenario = model, config, dict(spaces), scenario
        self.deterministic, self.allow_transfer, self.name = deterministic, allow_transfer, name
        self.env_overrides = required_env(config)
        self.gp = None
        if config.use_gp:
            from dual_agent.paper.rwgp import RandomWalkGP, RWGPConfig

            self.gp = RandomWalkGP(RWGPConfig(rank=config.gp_rank, steps=config.gp_steps))
        self._orderer = _heuristic("orderer", config.orderer)
        self._placer = _heuristic("placer", config.placer)
        self.teacher: Any = None   # training warm start: a baseline whose decisions are recorded instead
        self._prior = make_prior(config.prior)   # residual policy: the heuristic whose action gets a bonus
        self._prior_action = NO_PRIOR            # the prior's action at the current step
        self.model.eval()
        self.reset(None)

    # ----------------------------------------------------------------- loading
    @classmethod
    def load(cls, path: "str | Path", scenario: Optional[str] = None, **kwargs: Any) -> "DualAgentPolicy":
        """Load a checkpoint written by training (:mod:`dual_agent.paper.checkpoint`).

        ``scenario``, when given, must be the one the checkpoint was trained on.
        """
        return policy_from_checkpoint(load_checkpoint(path, scenario=scenario), **kwargs)

    @classmethod
    def pretrained(cls, scenario: str, **kwargs: Any) -> "DualAgentPolicy":
        """The checkpoint shipped in the package for ``scenario`` (see :func:`has_pretrained`)."""
        return cls.load(pretrained_path(scenario), scenario=scenario, **kwargs)

    # ----------------------------------------------------------------- protocol
    def reset(self, seed: Optional[int] = None) -> None:
        """Start an episode: new sampling stream, heuristic halves reset, GP rebuilt at first step."""
        order_seq, place_seq, sample_seq = np.random.SeedSequence(seed).spawn(3)
        if self._orderer is not None:
            self._orderer.reset(np.random.default_rng(order_seq))
        if self._placer is not None:
            self._placer.reset(np.random.default_rng(place_seq))
        self.rng = np.random.default_rng(sample_seq)
        if self.teacher is not None:
            self.teacher.reset(seed)
        if self._prior is not None:
            self._prior.reset(seed)
        self._prior_action = NO_PRIOR
        self._new_episode = True
        # Jobs started or preempted at the instant ``_touched_at`` (the guard only asks about "now",
        # and time never goes back, so older instants are forgotten).
        self._touched_at, self._touched = -1.0, set()
        self._touched_ids = _NO_IDS

    def act(self, observations: dict, infos: dict) -> dict[str, int]:
        agent, action, _, _ = self.decide(observations, infos)
        return joint_action(observations, agent, action)

    # ----------------------------------------------------------------- decisions
    def features(self, observations: dict, infos: Optional[dict] = None) -> dict[str, np.ndarray]:
        """The networks' inputs for one step: features, GP-augmented machines and both masks.

        With ``infos``, the orderer's mask also forbids touching a job again in the instant it was
        started or preempted (a preempt-restart loop at one instant would never end), and with a
        prior the heuristic is asked for its action (``"prior"``; -1 when none), which the acting
        agent's mask then always allows.
        """
        obs = observations["orderer"]
        if self._new_episode:
            self._check_spaces(obs)
            if self.gp is not None:
                self.gp.reset(obs["machines"])
            self._new_episode = False
        machines = obs["machines"]
        guard = infos is not None and bool(self._touched) and float(infos["orderer"]["time"]) == self._touched_at
        # The livelock guard and the work-conserving rule (work_conserving_mask) in one compiled call
        # (dual_agent.paper.masks).
        order_mask = order_mask_rules(obs["action_mask"], obs["jobs"],
                                      np.asarray(infos["orderer"]["job_ids"]) if guard else _NO_IDS,
                                      self._touched_ids if guard else _NO_IDS, guard, self.config.work_conserving)
        gp = self.gp.features(machines) if self.gp is not None else np.zeros((len(machines), GP_FEATURES), np.float32)
        place_mask = observations["placer"]["action_mask"].astype(bool)
        self._prior_action = NO_PRIOR
        if self._prior is not None and infos is not None and self.teacher is None:
            agent = PLACER if is_place_phase(obs) else ORDERER
            if (self._orderer if agent == ORDERER else self._placer) is None:   # a learned half acts
                act = self._prior.act(observations, infos)["orderer" if agent == ORDERER else "placer"]
                self._prior_action = int(act)
                mask = order_mask if agent == ORDERER else place_mask
                if not mask[act]:   # the agent's own rules must never forbid following the heuristic
                    mask = mask.copy()
                    mask[act] = True
                    order_mask, place_mask = (mask, place_mask) if agent == ORDERER else (order_mask, mask)
        return {"jobs": obs["jobs"], "machines": np.concatenate([machines, gp], axis=1), "global": obs["global"],
                "placing": obs["placing"], "order_mask": order_mask, "place_mask": place_mask,
                "prior": self._prior_action}

    def decide(self, observations: dict, infos: dict) -> tuple[int, int, bool, dict[str, np.ndarray]]:
        """(acting agent, its action, whether a learned half decided it, the features it saw).

        Forced moves (one legal action) and heuristic halves' choices are not learned decisions.
        """
        feats = self.features(observations, infos)
        agent = PLACER if is_place_phase(observations["orderer"]) else ORDERER
        action, learned = self._decide(agent, feats, observations, infos)
        self.remember(agent, action, feats, infos)
        return agent, action, learned, feats

    def remember(self, agent: int, action: int, feats: dict, infos: Optional[dict]) -> None:
        """Note the job the orderer just started or preempted (the livelock guard reads it)."""
        if agent == ORDERER and action < len(feats["jobs"]) and infos:
            now = float(infos["orderer"]["time"])
            if now != self._touched_at:
                self._touched_at, self._touched = now, set()
            self._touched.add(int(infos["orderer"]["job_ids"][action]))
            self._touched_ids = np.fromiter(self._touched, np.int64, len(self._touched))

    def _decide(self, agent: int, feats: dict, observations: dict, infos: dict) -> tuple[int, bool]:
        if self.teacher is not None:  # behaviour cloning: the teacher decides, every step (it may keep state)
            action = self.teacher.act(observations, infos)["orderer" if agent == ORDERER else "placer"]
            mask = feats["order_mask"] if agent == ORDERER else feats["place_mask"]
            if not mask[action]:  # e.g. a teacher that idles where the work-conserving rule forbids it
                raise ValueError(f"teacher {getattr(self.teacher, 'name', self.teacher)!r} chose action {action}, "
                                 f"which this agent's mask forbids (work_conserving={self.config.work_conserving})")
            return int(action), int(mask.sum()) > 1
        heuristic = self._orderer if agent == ORDERER else self._placer
        if heuristic is not None:
            name = "orderer" if agent == ORDERER else "placer"
            act = heuristic.order if agent == ORDERER else heuristic.place
            return int(act(observations[name], infos[name])), False
        mask = feats["order_mask"] if agent == ORDERER else feats["place_mask"]
        if np.count_nonzero(mask) == 1:  # a forced move is not a decision: no network call, nothing to learn
            return int(mask.argmax()), False
        return self.network_action(agent, feats), True

    def network_action(self, agent: int, feats: dict) -> int:
        """The network's action for ``agent`` on the step's features (from :meth:`features`): arg
        max of the portable logits when deterministic (the same bits in any process and on any
        CPU), else a sample; the prior's bonus and the mask applied."""
        mask = feats["order_mask"] if agent == ORDERER else feats["place_mask"]
        logits = None
        if self.deterministic:   # arg max: the same bits on every CPU (dual_agent.paper.portable)
            logits = portable_logits(self.model, agent, feats, mask)
        if logits is None:
            with torch.inference_mode():   # the modules' operations without their call overhead
                logits = actor_logits(self.model, agent, feats)
        return self.choose_from_logits(agent, logits, mask)

    def network_decides(self, agent: int, feats: dict) -> bool:
        """Whether the learned network takes this decision: not a teacher's, not a heuristic half's,
        not a forced move (batched rollouts ask the network only for these)."""
        if self.teacher is not None or (self._orderer if agent == ORDERER else self._placer) is not None:
            return False
        return int((feats["order_mask"] if agent == ORDERER else feats["place_mask"]).sum()) > 1

    def choose_from_logits(self, agent: int, logits: np.ndarray, mask: np.ndarray) -> int:
        """The action from the network's logits (float64) under ``mask``: arg max or a sample.

        With a prior, its bonus is added here to the heuristic's action of this step (the one
        :meth:`features` computed last): every path from logits to an action goes through here.
        """
        if self._prior_action >= 0:
            logits = add_prior_bonus(logits, self._prior_action, self.config.prior_bonus)
        if self.deterministic and logits.dtype == np.float64 and mask.dtype == np.bool_:
            action = masked_argmax(logits, mask)           # the checks and the arg max below, compiled
            if action >= 0:
                return action
        if not np.isfinite(logits[mask]).all():
            # NaN logits would pick the first legal action without notice (arg max of NaNs).
            raise FloatingPointError(
                f"dual agent {self.name!r}: non-finite {'orderer' if agent == ORDERER else 'placer'} logits "
                f"(NaN or inf) for legal actions; its weights or its inputs are not finite")
        return self._choose(logits, mask)

    def _choose(self, logits: np.ndarray, mask: np.ndarray) -> int:
        if not mask.any():
            raise RuntimeError("no legal action in the acting agent's mask")
        logits = np.where(mask, logits, -np.inf)
        if not self.deterministic:
            # Gumbel-max: a draw from the masked softmax, from the policy's own seeded stream.
            logits = logits + self.rng.gumbel(size=logits.shape)
        return int(np.argmax(logits))

    def _check_spaces(self, obs: dict) -> None:
        from cluster_env.envs.observation import MACHINE_FEATURES
        from cluster_env.envs.observation_ext import OBSERVATION_MODES, global_features, job_features

        want, got = self.spaces, {"rows": obs["jobs"].shape[0], "machines": obs["machines"].shape[0]}
        layouts = [(list(job_features(m)), list(global_features(m))) for m in OBSERVATION_MODES]
        if ((list(want["job_features"]), list(want["global_features"])) not in layouts
                or list(want["machine_features"]) != list(MACHINE_FEATURES)
                or obs["machines"].shape[1] != len(want["machine_features"])):
            raise ValueError("this dual agent was trained on another observation layout "
                             "(feature names differ from this cluster_env version); retrain it")
        if obs["jobs"].shape[1] != len(want["job_features"]) or obs["global"].shape[0] != len(want["global_features"]):
            raise ValueError(
                f"this dual agent reads {len(want['job_features'])} job and {len(want['global_features'])} global "
                f"features; this environment gives {obs['jobs'].shape[1]} and {obs['global'].shape[0]}: run it "
                f"with the observation layout it was trained on (its env_overrides: {self.env_overrides})")
        if not self.allow_transfer and (got["rows"] != want["rows"] or got["machines"] != want["machines"]):
            raise ValueError(
                f"this dual agent was trained on {self.scenario or 'another scenario'} with "
                f"{want['rows']} candidate rows and {want['machines']} machines; this environment has "
                f"{got['rows']} rows and {got['machines']} machines. Pass allow_transfer=True to run it anyway.")


_NO_IDS = np.zeros(0, dtype=np.int64)


def joint_action(observations: dict, agent: int, action: int) -> dict[str, int]:
    """The environment's action dict: ``action`` for the acting agent, the no-op for the other."""
    actions = {name: len(observations[name]["action_mask"]) - 1 for name in ("orderer", "placer")}
    actions["orderer" if agent == ORDERER else "placer"] = action
    return actions


def work_conserving_mask(order_mask: np.ndarray, jobs: np.ndarray) -> np.ndarray:
    """Forbid ``advance`` while a pending job can start (running rows, i.e. preemptions, stay legal).

    Idling a fitting job is almost never right and an untrained agent that idles can stretch an
    episode a thousandfold; this rule keeps exploration where it matters.
    """
    starts = order_mask[:-1] & (jobs[:, 1] < 0.5)          # legal rows that are pending jobs
    if starts.any():
        order_mask = order_mask.copy()
        order_mask[-1] = False
    return order_mask


def required_env(config: DualAgentConfig) -> dict:
    """Environment settings the agent needs: its heuristic halves' (e.g. Tiresias: preemption), then its own."""
    needs: dict = {}
    prior = make_prior(config.prior)
    if prior is not None:   # a residual policy needs what its heuristic needs (LAS: preemption)
        needs.update(prior.env_overrides)
    for agent, name in (("placer", config.placer), ("orderer", config.orderer)):
        half = _heuristic(agent, name)
        if half is not None:
            needs.update(half.env_overrides)
    return {**needs, **config.env_overrides}


def _heuristic(agent: str, name: str) -> Any:
    """The heuristic half for ``name``, or None when that half is learned."""
    if name == LEARNED:
        return None
    from baselines.registry import ORDERERS, PLACERS

    return (ORDERERS if agent == "orderer" else PLACERS)[name]()
