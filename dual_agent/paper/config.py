"""Configuration of the dual agent (architecture) and of its MAPPO training.

Both are frozen dataclasses checked on construction, stored inside every checkpoint as plain dicts
so that a checkpoint rebuilds exactly the network it was trained with.
"""
from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Optional

#: Values of :attr:`DualAgentConfig.orderer` / ``placer`` that mean "the learned agent".
LEARNED = "learned"
#: Values of :attr:`TrainConfig.algorithm`, ``baseline`` and ``advantage_scale``.
ALGORITHMS = ("mappo", "rloo")
BASELINES = ("time", "episode", "critic")
SCALES = ("none", "scale", "log")


#: Upper bounds of sizes that allocate at once (docs/reference.md, Guarantees): the networks'
#: width (a layer of width H holds H x H weights: 4,096 is 64 MiB a layer, 64 is the default) and
#: the rollout worker processes (each a simulator and a copy of the networks).
MAX_HIDDEN = 4096
MAX_N_ENVS = 256


def _positive(name: str, value: Any, integer: bool = False, allow_zero: bool = False,
              maximum: Optional[int] = None) -> None:
    kind = int if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, kind):
        raise ValueError(f"{name} must be {'an integer' if integer else 'a number'}, got {value!r}")
    if value < 0 or (value == 0 and not allow_zero):
        raise ValueError(f"{name} must be {'>= 0' if allow_zero else '> 0'}, got {value!r}")
    if maximum is not None and value > maximum:
        raise ValueError(f"{name}={value:,} is above its bound {maximum:,} (docs/reference.md, Guarantees)")


@dataclass(frozen=True)
class DualAgentConfig:
    """Architecture of the two agents and of the centralised critic.

    ``orderer`` / ``placer`` are ``"learned"`` or the name of a heuristic from
    :mod:`baselines.registry` (``ORDERERS`` / ``PLACERS``): a heuristic half is how the ablations
    "orderer only" and "placer only" are built. ``use_gp=False`` feeds zeros instead of the
    Random Walk GP's posterior (the "without GP" ablation).
    """

    hidden: int = 64               # width of every encoder and head
    orderer: str = LEARNED
    placer: str = LEARNED
    use_gp: bool = True
    work_conserving: bool = True   # the orderer may not `advance` while a pending job can start
    gp_rank: int = 64              # low-rank size of the RWGP kernel (exact below it)
    gp_steps: int = 3              # p of the p-step random-walk kernel
    env_overrides: dict = field(default_factory=dict)   # settings the agent was trained with (e.g. preemption)
    prior: Optional[str] = None    # residual policy on this heuristic (e.g. "las+fastest"); None: plain network
    prior_bonus: float = 3.0       # logit added to the prior's action

    def __post_init__(self) -> None:
        from baselines.registry import ORDERERS, PLACERS

        _positive("hidden", self.hidden, integer=True, maximum=MAX_HIDDEN)
        _positive("gp_rank", self.gp_rank, integer=True)
        _positive("gp_steps", self.gp_steps, integer=True)
        if self.orderer != LEARNED and self.orderer not in ORDERERS:
            raise ValueError(f"orderer must be {LEARNED!r} or one of {sorted(ORDERERS)}, got {self.orderer!r}")
        if self.placer != LEARNED and self.placer not in PLACERS:
            raise ValueError(f"placer must be {LEARNED!r} or one of {sorted(PLACERS)}, got {self.placer!r}")
        if self.orderer != LEARNED and self.placer != LEARNED:
            raise ValueError("at least one of orderer / placer must be 'learned'")
        for name in ("use_gp", "work_conserving"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be a bool, got {getattr(self, name)!r}")
        if not isinstance(self.env_overrides, dict):
            raise ValueError(f"env_overrides must be a dict, got {self.env_overrides!r}")
        if self.prior is not None:
            from dual_agent.paper.prior import check_prior

            check_prior(self.prior)
        _positive("prior_bonus", self.prior_bonus, allow_zero=True)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict, where: str = "") -> "DualAgentConfig":
        """The config a checkpoint stores; ``where`` (e.g. ``"agent.pt: field config"``) starts
        every error's message."""
        return _from_dict(cls, data, where)


@dataclass(frozen=True)
class TrainConfig:
    """Training hyper-parameters (MAPPO, or RLOO with ``algorithm="rloo"``) and the run's scenario.

    A *rollout* is ``n_envs`` workers each playing whole episodes until it holds at least
    ``steps_per_worker`` decisions; episode seeds derive from ``seed``, the iteration and the worker,
    so a resumed run sees the same episodes as an uninterrupted one.
    """

    scenario: str = "philly-v0"
    split: str = "train"
    env_kwargs: dict = field(default_factory=dict)
    jobs_per_episode: Optional[int] = None     # shorter training episodes (None: the scenario's window)
    timesteps: int = 200_000
    n_envs: int = 2                # rollout worker processes (0: collect in this process)
    steps_per_worker: int = 2048
    learning_rate: float = 3e-4
    gamma: float = 1.0             # the reward sums to -avg JCT: undiscounted is the objective itself
    gae_lambda: float = 0.95
    clip: float = 0.2
    entropy_coef: float = 0.01
    value_coef: float = 0.5
    epochs: int = 4
    minibatch: int = 512
    max_grad_norm: float = 0.5
    seed: int = 0
    imitate: Optional[str] = None  # warm start: a baseline name whose decisions the actors first imitate
    imitate_iterations: int = 0    # iterations of behaviour cloning (teacher plays, cross-entropy loss)
    eval_every: int = 10           # iterations between validation evaluations (0: never)
    eval_seeds: int = 2            # validation episodes per evaluation
    algorithm: str = "mappo"       # "mappo" (workers, GAE with the critic) or "rloo" (dual_agent.paper.rloo)
    group_windows: int = 2         # rloo: windows drawn per iteration
    group_size: int = 4            # rloo: rollouts played on each window (>= 2: the baseline leaves one out)
    baseline: str = "time"         # rloo: "time", "episode" or "critic" (see dual_agent.paper.rloo)
    advantage_scale: str = "log"   # rloo: "none", "scale" or "log" (per-window normalisation)
    device: str = "cpu"            # torch device of the networks ("cpu", "cuda", "cuda:1")
    # Validation windows (dual_agent.validation): "matched" to the test period's contention, or
    # "split" (the validation split's seeds; what checkpoints saved before the option used).
    validation: str = "matched"
    # DAgger from hindsight teachers (dual_agent.paper.dagger): "best-known" or None.
    teacher: Optional[str] = None
    teacher_file: Optional[str] = None   # the teachers' cache (default: <run folder>/teachers.json)
    teacher_windows: int = 24      # training windows (train split, seeds 0 ..) that get a teacher
    teacher_episodes: int = 60     # compiled episodes of the hindsight search per window
    dagger_iterations: int = 0     # DAgger iterations before the reinforcement learning ones
    dagger_episodes: int = 4       # teacher windows the student plays per DAgger iteration
    dagger_decay: float = 0.5      # P(teacher plays a decision) = decay ** iteration (1 at the first)
    dagger_epochs: int = 2         # passes of cross-entropy over the aggregate per iteration
    dagger_max_samples: int = 200_000   # the aggregate's cap (the oldest samples go first)
    dagger_workers: int = 1        # processes that play a DAgger iteration's episodes (1: this one; same weights)

    def __post_init__(self) -> None:
        for name in ("timesteps", "steps_per_worker", "epochs", "minibatch", "eval_seeds"):
            _positive(name, getattr(self, name), integer=True)
        for name in ("n_envs", "eval_every", "seed", "imitate_iterations"):
            _positive(name, getattr(self, name), integer=True, allow_zero=True)
        _positive("n_envs", self.n_envs, integer=True, allow_zero=True, maximum=MAX_N_ENVS)
        for name in ("learning_rate", "clip", "max_grad_norm"):
            _positive(name, getattr(self, name))
        for name in ("entropy_coef", "value_coef"):
            _positive(name, getattr(self, name), allow_zero=True)
        for name in ("gamma", "gae_lambda", "dagger_decay"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
                raise ValueError(f"{name} must be in [0, 1], got {value!r}")
        if self.jobs_per_episode is not None:
            _positive("jobs_per_episode", self.jobs_per_episode, integer=True)
        if not isinstance(self.env_kwargs, dict):
            raise ValueError(f"env_kwargs must be a dict, got {self.env_kwargs!r}")
        for name, allowed in (("algorithm", ALGORITHMS), ("baseline", BASELINES), ("advantage_scale", SCALES)):
            if getattr(self, name) not in allowed:
                raise ValueError(f"{name} must be one of {list(allowed)}, got {getattr(self, name)!r}")
        for name in ("group_windows", "group_size"):
            _positive(name, getattr(self, name), integer=True)
        if self.algorithm == "rloo" and self.group_size < 2:
            raise ValueError(f"group_size must be >= 2 for rloo (the baseline of a rollout is the mean of the "
                             f"others on its window), got {self.group_size}")
        if self.validation not in ("matched", "split"):
            raise ValueError(f"validation must be 'matched' or 'split', got {self.validation!r}")
        if not isinstance(self.device, str) or not re.fullmatch(r"cpu|cuda(:\d+)?|mps", self.device):
            raise ValueError(f"device must be 'cpu', 'cuda', 'cuda:N' or 'mps', got {self.device!r}")
        for name in ("teacher_windows", "teacher_episodes", "dagger_episodes", "dagger_epochs", "dagger_max_samples"):
            _positive(name, getattr(self, name), integer=True)
        _positive("dagger_iterations", self.dagger_iterations, integer=True, allow_zero=True)
        _positive("dagger_workers", self.dagger_workers, integer=True, maximum=MAX_N_ENVS)
        if self.teacher not in (None, "best-known"):
            raise ValueError(f"teacher must be 'best-known' (the hindsight search's schedule of each training "
                             f"window) or None, got {self.teacher!r}")
        if self.dagger_iterations and self.teacher is None:
            raise ValueError("dagger_iterations needs teacher='best-known' (the teacher that labels the states)")
        if self.teacher is not None and self.imitate is not None:
            raise ValueError("teacher and imitate are two warm starts; pass one")
        if self.teacher is not None and self.split != "train":
            raise ValueError(f"a hindsight teacher is computed on the train split only, got split={self.split!r}")
        if self.imitate_iterations and not self.imitate:
            raise ValueError("imitate_iterations needs imitate (the teacher's policy name)")
        if self.imitate is not None:
            from baselines.registry import make_policy

            make_policy(self.imitate)  # a clear ValueError for an unknown teacher, now rather than in a worker

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict, where: str = "") -> "TrainConfig":
        """As :meth:`DualAgentConfig.from_dict`."""
        # A checkpoint saved before ``validation`` existed validated on the validation split.
        return _from_dict(cls, {"validation": "split", **data} if isinstance(data, dict) else data, where)


def _from_dict(cls: type, data: Any, where: str) -> Any:
    """``cls(**data)`` for a dict of its fields; anything else (a string, whose characters would
    read as field names; an unknown field; a bad value) is a ``ValueError`` that ``where`` starts."""
    prefix = f"{where}: " if where else ""
    if not isinstance(data, dict):
        shown = repr(data) if len(repr(data)) <= 60 else type(data).__name__
        raise ValueError(f"{prefix}{cls.__name__} settings must be an object of fields, got {shown}")
    names = {f.name for f in fields(cls)}
    unknown = sorted(set(data) - names, key=str)
    if unknown:
        raise ValueError(f"{prefix}unknown {cls.__name__} field(s) {unknown}; valid: {sorted(names)}")
    try:
        return cls(**data)
    except (ValueError, TypeError) as exc:
        if not where:
            raise
        raise ValueError(f"{prefix}{exc}") from None
