"""A learned priority index on top of least-attained-service: the ordering agent in *priority mode*.

The ordering agent of :mod:`dual_agent.paper.networks` picks one candidate row per decision, so changing
one preemption of LAS needs the network to out-score its prior at every tick of a window (15k to
143k decisions per 1,000-job window on Philly). Here the ordering agent scores candidates
instead, and the scores feed LAS's own scheduling rule
(:class:`baselines.orderers.PreemptivePriority`: start the best job of the should-run set, preempt
at a tick, backfill, advance). A candidate's priority key (lower runs first) is::

    key = log1p(attained GPU-seconds) + score(phi(row))

with ``phi`` the row's :data:`PRIORITY_FEATURES` (the extended observation's, never durations;
defined with :data:`PLACER_FEATURES` and :data:`PLACER_BONUS` in :mod:`baselines.learned_key`,
which the compiled engine reads too)
and ``score`` a linear map (``hidden=0``, the default) or a one-hidden-layer tanh network plus the
linear map. All weights start at zero, so the untrained agent **is** LAS, decision for decision
(tested against the compiled ``las`` baseline). A learned weight reads as a rule: ``+1`` on
``gpus_log2`` orders by ``attained x GPUs^(1/ln 2)``, i.e. smaller jobs earlier at equal service.

The placing agent is a *residual* scorer on a heuristic placer (:class:`ResidualPlacer`): it
places on the allowed machine with the highest ``v . psi(machine) + PLACER_BONUS x [the heuristic
picks it]``, ``psi`` the :data:`PLACER_FEATURES`; with ``v = 0`` it is the heuristic, machine for
machine, and a learned ``v`` must outweigh the bonus to deviate.

With the ``migrate`` field (a threshold > 1; None, the default, and files without the field: no
migration) the orderer is :class:`MigratingLearnedOrderer`: the learned key decides which jobs run,
and ``las-migrate``'s rule (:class:`baselines.migrate.MigratingLAS`) moves a running one-machine
job to a free machine at least ``migrate`` times faster when the agent would advance at a tick.
With zero weights and ``migrate=1.5`` the agent **is** ``las-migrate``, decision for decision
(tested against the compiled ``las-migrate`` baseline), so a trained agent starts there.

The agent is a plain numpy policy (no torch at run time): :class:`PriorityAgentPolicy` composes
the orderer with a placer (a heuristic placer by name, the ``placer`` field, under the residual
scorer), carries its
environment needs (``preemption=True``, ``observation="extended"``, ``"extended-v2"`` with
``migrate``, whose placement columns the rule reads) and is saved as one JSON file
(:func:`save_priority_agent`, :func:`load_priority_agent`; names ending in ``.priority.json`` load
in the harness and ``cluster-bench run``). Training: :mod:`dual_agent.priority.es`.
"""
from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Optional

import numpy as np

from baselines.harness.files import atomic_write
from baselines.learned_key import PLACER_BONUS, PLACER_FEATURES, PRIORITY_FEATURES
from baselines.migrate import MIGRATE_OBSERVATION, MigratingLAS
from baselines.obs import M as _M
from baselines.orderers import PreemptivePriority, visible_candidates
from baselines.placers import allowed_machines, speed_and_fit
from baselines.policy import ComposedPolicy, Placer
from baselines.registry import PLACERS
from cluster_env.envs.observation_ext import global_features, job_features

FORMAT = "hetero-cluster-sched/priority-agent"
VERSION = 1
SUFFIX = ".priority.json"
#: The fields of a priority agent file, and of its ``weights`` (what save_priority_agent writes).
FIELDS = ("format", "version", "features", "placer_features", "scenario", "placer", "preempt_at", "training",
          "migrate", "weights")
WEIGHT_FIELDS = ("linear", "hidden_w", "hidden_b", "out", "placer")
#: The most tanh units of the score's hidden layer (each holds one weight per feature; 0, the
#: default, is a linear score): a bound that protects the memory (docs/reference.md, Guarantees).
MAX_HIDDEN_UNITS = 4096

_JF = {n: i for i, n in enumerate(job_features("extended"))}
_GF = {n: i for i, n in enumerate(global_features("extended"))}
_N_EXTENDED_V2 = len(job_features(MIGRATE_OBSERVATION))


class PriorityCheckpointError(ValueError):
    """A priority-agent file that cannot be used; the message names the file and the reason."""


@dataclass
class PriorityModel:
    """The score ``w . phi + v . tanh(W phi + b)`` of :data:`PRIORITY_FEATURES` rows, and the
    residual placer's weights.

    Fields (F = len(PRIORITY_FEATURES), H = hidden, Q = len(PLACER_FEATURES)):
        linear: (F,) weights ``w`` of the linear part.
        hidden_w: (H, F) first-layer weights ``W`` (random at creation, so that ``v`` can learn).
        hidden_b: (H,) first-layer biases ``b``.
        out: (H,) output weights ``v`` (zero at creation: the score starts at 0).
        placer: (Q,) the residual placer's weights (zero: the heuristic placer itself).
    """

    linear: np.ndarray
    hidden_w: np.ndarray
    hidden_b: np.ndarray
    out: np.ndarray
    placer: np.ndarray = field(default_factory=lambda: np.zeros(len(PLACER_FEATURES)))

    @classmethod
    def zeros(cls, hidden: int = 0, seed: int = 0) -> "PriorityModel":
        """The untrained model (score 0 everywhere: the agent is LAS)."""
        if isinstance(hidden, bool) or not isinstance(hidden, int) or not 0 <= hidden <= MAX_HIDDEN_UNITS:
            raise ValueError(f"hidden must be an integer in 0 .. {MAX_HIDDEN_UNITS:,}, got {hidden!r}")
        f = len(PRIORITY_FEATURES)
        rng = np.random.default_rng(seed)
        return cls(np.zeros(f), rng.normal(0.0, 1.0 / math.sqrt(f), (hidden, f)), np.zeros(hidden), np.zeros(hidden))

    @property
    def hidden(self) -> int:
        return int(self.out.shape[0])

    def score(self, phi: np.ndarray) -> np.ndarray:
        """(N,) scores of (N, F) feature rows."""
        s = sum_by_feature(phi, self.linear)
        if self.hidden:
            s = s + np.tanh(phi @ self.hidden_w.T + self.hidden_b) @ self.out
        return s

    # The trainer perturbs the model as one flat vector: [linear, hidden_w, hidden_b, out, placer].
    def flat(self) -> np.ndarray:
        return np.concatenate([self.linear, self.hidden_w.ravel(), self.hidden_b, self.out, self.placer])

    def with_flat(self, theta: np.ndarray) -> "PriorityModel":
        f, h, placer = len(PRIORITY_FEATURES), self.hidden, self.placer_slice(self.hidden)
        theta = np.asarray(theta, dtype=np.float64)
        if theta.shape != (placer.stop,):
            raise ValueError(f"expected {placer.stop} parameters, got shape {theta.shape}")
        a, b = f, f + h * f
        return PriorityModel(theta[:a].copy(), theta[a:b].reshape(h, f).copy(), theta[b:b + h].copy(),
                             theta[b + h:placer.start].copy(), theta[placer].copy())

    @staticmethod
    def placer_slice(hidden: int) -> slice:
        """Where the placer's weights sit in :meth:`flat` for a model with ``hidden`` units."""
        start = len(PRIORITY_FEATURES) * (1 + hidden) + 2 * hidden
        return slice(start, start + len(PLACER_FEATURES))


def sum_by_feature(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """(N,) ``x @ w`` of (N, F) rows, summed feature by feature (not a dot product, whose rounding
    depends on the BLAS): the compiled engine (baselines.engine) does the same float operations in
    the same order, so both give the same schedules and placements."""
    s = x[:, 0] * w[0]
    for k in range(1, x.shape[1]):
        s = s + x[:, k] * w[k]
    return s


def priority_features(obs: dict, rows: np.ndarray) -> np.ndarray:
    """(len(rows), F) :data:`PRIORITY_FEATURES` of the candidate ``rows`` of an extended observation."""
    jobs = obs["jobs"]
    g = obs["global"]
    # extended-v2 (the migrating agent's) appends columns to extended's: the same leading columns.
    if jobs.shape[1] not in (len(_JF), _N_EXTENDED_V2):
        raise ValueError(f"the priority agent reads the extended observation ({len(_JF)} job columns, or "
                         f"{_N_EXTENDED_V2} with {MIGRATE_OBSERVATION}), got {jobs.shape[1]}: create the "
                         f"environment with observation='extended'")
    x = jobs[rows].astype(np.float64)
    fm, fr = float(g[_GF["finished_mean_log"]]), float(g[_GF["finished_recent_log"]])
    tm, tr = x[:, _JF["tenant_mean_log"]], x[:, _JF["tenant_recent_log"]]
    known = (tm >= 0.0) & (fm >= 0.0)
    phi = np.empty((len(rows), len(PRIORITY_FEATURES)))
    phi[:, 0] = x[:, _JF["gpus_log2"]]
    phi[:, 1] = np.where(known, tm - fm, 0.0)
    phi[:, 2] = np.where(known, tr - fr, 0.0)
    phi[:, 3] = known
    phi[:, 4] = x[:, _JF["comm_intensity"]]
    phi[:, 5] = x[:, _JF["best_speed"]]
    phi[:, 6] = x[:, _JF["restarts_log"]] / 3.0
    phi[:, 7] = x[:, _JF["wait_log"]] / 10.0
    phi[:, 8] = x[:, _JF["running"]]
    return phi


class LearnedPriorityOrderer(PreemptivePriority):
    """LAS's scheduling rule with the key ``log1p(attained) + model.score(phi)`` (lower runs first).

    Args:
        model: the score; :meth:`PriorityModel.zeros` gives LAS exactly.
        preempt_at: ``"tick"`` (default) or ``"event"``, as for :class:`baselines.orderers.LAS`.
    """

    name = "learned-priority"
    env_overrides = {"preemption": True, "observation": "extended"}

    def __init__(self, model: PriorityModel, preempt_at: str = "tick") -> None:
        super().__init__(preempt_at)
        self.model = model

    def keys(self, obs: dict, info: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return learned_keys(self.model, obs, info)


def learned_keys(model: PriorityModel, obs: dict, info: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(rows, key, job id) of every visible candidate, key ``log1p(attained) + model.score(phi)``
    (lower runs first): the ``keys`` of both learned orderers."""
    rows, ids = visible_candidates(obs, info)
    attained = obs["jobs"][rows, _JF["attained_all_log"]].astype(np.float64)
    if not len(rows):
        return rows, attained, ids
    with np.errstate(over="ignore", invalid="ignore"):
        keys = attained + model.score(priority_features(obs, rows))
    if not np.all(np.isfinite(keys)):
        raise ValueError("priority agent: a priority key is not finite (inf or NaN); its weights are too "
                         f"large for its inputs (load_priority_agent bounds them by +-{MAX_WEIGHT:g})")
    return rows, keys, ids


class MigratingLearnedOrderer(MigratingLAS):
    """:class:`LearnedPriorityOrderer`'s key under ``las-migrate``'s rule: the learned key orders
    (and so decides which jobs run and which are preempted), and when the agent would advance at a
    tick, :class:`~baselines.migrate.MigratingLAS`'s rule preempts the running one-machine job
    that a free machine runs at least ``threshold`` times faster and restarts it at once (the
    placer then moves it). :meth:`PriorityModel.zeros` gives ``las-migrate<threshold>`` exactly.

    Args:
        model: the score.
        threshold: the speed-up a move needs (> 1; ``las-migrate``'s default 1.5).
        preempt_at: ``"tick"`` (default) or ``"event"``, as for :class:`baselines.orderers.LAS`.
    """

    def __init__(self, model: PriorityModel, threshold: float, preempt_at: str = "tick") -> None:
        super().__init__(threshold, preempt_at=preempt_at)
        self.model = model
        self.name = f"learned-priority-migrate{self.threshold:g}"

    def keys(self, obs: dict, info: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return learned_keys(self.model, obs, info)


def placer_features(obs: dict, ok: np.ndarray) -> np.ndarray:
    """(len(ok), Q) :data:`PLACER_FEATURES` of the allowed machines ``ok`` of a PLACE observation."""
    machines = obs["machines"]
    speed, free, whole, _ = speed_and_fit(obs, ok)
    psi = np.empty((len(ok), len(PLACER_FEATURES)))
    psi[:, 0] = whole
    psi[:, 1] = speed / speed.max()
    psi[:, 2] = machines[ok, _M["free_frac"]]
    psi[:, 3] = machines[ok, _M["free_gpus"]]
    psi[:, 4] = machines[ok, _M["jobs"]].astype(np.float64) / 4.0
    return psi


class ResidualPlacer(Placer):
    """A learned linear score on top of a heuristic placer: the allowed machine with the highest
    ``weights . psi + PLACER_BONUS x [base picks it]`` (ties to the lowest index); zero weights
    give ``base`` exactly.

    Args:
        base: the heuristic placer (its random stream, if any, is the one ``reset`` gives).
        weights: (Q,) weights of :data:`PLACER_FEATURES`.
    """

    def __init__(self, base: Placer, weights: np.ndarray) -> None:
        self.base, self.weights = base, np.asarray(weights, dtype=np.float64)
        self.name = base.name if not np.any(self.weights) else f"learned-{base.name}"
        self.env_overrides = dict(base.env_overrides)

    def reset(self, rng: np.random.Generator) -> None:
        self.base.reset(rng)

    def place(self, obs: dict, info: dict) -> int:
        pick = int(self.base.place(obs, info))
        if not np.any(self.weights):
            return pick
        ok = allowed_machines(obs)
        if not len(ok):
            return pick
        score = sum_by_feature(placer_features(obs, ok), self.weights) + np.where(ok == pick, PLACER_BONUS, 0.0)
        return int(ok[int(np.argmax(score))])


@dataclass
class PriorityAgentSpec:
    """Everything a saved priority agent holds besides the weights."""

    scenario: str
    placer: str = "fastest"
    preempt_at: str = "tick"
    training: dict = field(default_factory=dict)    # command, seed, wall time, iterations, figures
    # las-migrate's threshold (> 1): the migration rule on top of the learned key; None: no migration.
    migrate: Optional[float] = None


class PriorityAgentPolicy(ComposedPolicy):
    """The priority-mode ordering agent composed with a placer; a policy for the harness.

    Args:
        model: the learned score.
        spec: scenario, placer name, preemption timing and the training record.
        name: display name (default ``dual-priority(<placer>)``).
    """

    def __init__(self, model: PriorityModel, spec: PriorityAgentSpec, name: Optional[str] = None) -> None:
        if spec.placer not in PLACERS:
            raise ValueError(f"placer must be one of {sorted(PLACERS)}, got {spec.placer!r}")
        check_migrate(spec.migrate)
        self.model, self.spec = model, spec
        orderer = (LearnedPriorityOrderer(model, spec.preempt_at) if spec.migrate is None
                   else MigratingLearnedOrderer(model, spec.migrate, spec.preempt_at))
        super().__init__(orderer, ResidualPlacer(PLACERS[spec.placer](), model.placer),
                         name=name or f"dual-priority({spec.placer})")

    @property
    def scenario(self) -> str:
        """The scenario the agent was trained for: the harness refuses to score it on another
        unless ``allow_env_mismatch`` (``baselines.harness.episode.env_mismatch``)."""
        return self.spec.scenario

    def compiled_episode(self, scenario: Any, split: str, seed: int, env_kwargs: Optional[dict] = None,
                         allow_env_mismatch: bool = False):
        """The episode in the compiled engine (:func:`baselines.engine.run_weighted_las_episode`),
        record for record what the API gives; the harness calls it. Raises
        ``baselines.engine.Unsupported`` for what only the API plays (a hidden layer, event-time
        preemption, settings the engine does not run), and the API's ``EnvMismatchError`` for a
        run on another scenario or environment than the agent's."""
        from baselines.engine import Unsupported, run_weighted_las_episode
        from baselines.harness.episode import env_settings

        env_settings(self, env_kwargs, allow_env_mismatch, scenario)   # the check the API path makes
        if np.max(np.abs(self.model.flat()), initial=0.0) > MAX_WEIGHT:
            raise ValueError(f"priority agent {self.name!r}: a weight exceeds +-{MAX_WEIGHT:g}; the compiled "
                             "engine's priority keys would overflow")
        if self.model.hidden:
            raise Unsupported("a priority agent with a hidden layer runs through the API")
        if self.spec.preempt_at != "tick":
            raise Unsupported("event-time preemption of a priority agent runs through the API")
        return run_weighted_las_episode(self.model.linear, self.spec.placer, scenario, split, seed, env_kwargs,
                                        name=self.name, allow_env_mismatch=allow_env_mismatch,
                                        placer_weights=self.model.placer, migrate=self.spec.migrate)


def check_migrate(value: Any) -> Optional[float]:
    """``value`` if it is a valid ``migrate`` setting (None, or a finite threshold > 1, not a
    bool); a ``ValueError`` naming the field otherwise."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (math.isfinite(value) and value > 1):
        raise ValueError(f"migrate must be null (no migration) or a speed-up threshold > 1, got {value!r}")
    return value


# ---------------------------------------------------------------- files
def save_priority_agent(policy: PriorityAgentPolicy, path: "str | Path") -> Path:
    """Write ``policy`` as JSON (``FORMAT``, ``VERSION``, features, spec, weights); returns the path."""
    path = Path(path)
    m = policy.model
    spec = asdict(policy.spec)
    if spec["migrate"] is None:        # files of agents without migration stay as they were
        del spec["migrate"]
    doc = {"format": FORMAT, "version": VERSION, "features": list(PRIORITY_FEATURES),
           "placer_features": list(PLACER_FEATURES), **spec,
           "weights": {"linear": m.linear.tolist(), "hidden_w": m.hidden_w.tolist(),
                       "hidden_b": m.hidden_b.tolist(), "out": m.out.tolist(), "placer": m.placer.tolist()}}
    text = json.dumps(doc, indent=1) + "\n"
    # A temporary file of its own beside it, then a rename: never through a link, never half written
    # (a full disk names the file and leaves the previous one).
    return atomic_write(path, lambda f: f.write(text))


#: Largest weight magnitude a file may hold: features are about unit scale, so a larger weight is
#: no trained value, and near 1e308 the priority keys overflow to inf and NaN.
MAX_WEIGHT = 1e6


def _is_number(x: Any) -> bool:
    """A JSON number: int or float, not a bool (``true`` is 1 to Python) nor a string."""
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _array(doc: dict, key: str, shape: tuple, path: Path) -> np.ndarray:
    try:
        value = doc["weights"][key]
    except (KeyError, TypeError):
        raise PriorityCheckpointError(f"{path}: field weights.{key} is missing") from None
    items = [value]
    for _ in shape:                              # one level of lists per dimension, no deeper
        if not all(isinstance(v, list) for v in items):
            raise PriorityCheckpointError(f"{path}: field weights.{key} must be lists of numbers of shape {shape}")
        items = [x for v in items for x in v]
    bad = next((x for x in items if not _is_number(x)), None)
    if bad is not None:
        raise PriorityCheckpointError(f"{path}: field weights.{key} holds {bad!r}, not a number "
                                      "(numbers are written without quotes)")
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError, OverflowError) as exc:
        raise PriorityCheckpointError(f"{path}: field weights.{key} is not numeric ({exc})") from None
    if arr.size == 0 and 0 in shape:
        arr = arr.reshape(shape)
    if arr.shape != shape:
        raise PriorityCheckpointError(f"{path}: field weights.{key} must be numbers of shape {shape}, "
                                      f"got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        i = np.unravel_index(int(np.argmax(~np.isfinite(arr))), arr.shape)
        raise PriorityCheckpointError(f"{path}: field weights.{key}{list(map(int, i))} is {arr[i]}; weights must be "
                                      "finite numbers")
    if arr.size and np.max(np.abs(arr)) > MAX_WEIGHT:
        i = np.unravel_index(int(np.argmax(np.abs(arr))), arr.shape)
        raise PriorityCheckpointError(f"{path}: field weights.{key}{list(map(int, i))} is {arr[i]:g}; a weight must "
                                      f"lie within +-{MAX_WEIGHT:g} (larger ones overflow the priority keys)")
    return arr


def _text(doc: dict, key: str, path: Path, default: Optional[str] = None) -> str:
    """The string field ``key`` (``default`` when absent and there is one); null, a number or
    another type is an error naming the field."""
    if key not in doc and default is not None:
        return default
    value = doc.get(key)
    if not isinstance(value, str) or not value:
        raise PriorityCheckpointError(f"{path}: field {key} must be a non-empty string, got {value!r}")
    return value


def load_priority_agent(path: "str | Path", scenario: Optional[str] = None,
                        name: Optional[str] = None) -> PriorityAgentPolicy:
    """Read a file written by :func:`save_priority_agent`.

    Raises:
        PriorityCheckpointError: unreadable JSON, another format or version, other features, bad
            weights, or (with ``scenario``) a file trained for another scenario; the message names
            the file and the field.
    """
    path = Path(path)
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        raise PriorityCheckpointError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise PriorityCheckpointError(f"{path}: not a priority agent (unreadable JSON: {exc})") from None
    except (RecursionError, MemoryError, ValueError) as exc:   # nested too deep, huge numbers
        raise PriorityCheckpointError(f"{path}: not a priority agent (JSON too deeply nested or too large: "
                                      f"{type(exc).__name__})") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise PriorityCheckpointError(f"{path}: field format is not {FORMAT!r}")
    # Strict, as the .agent.json settings files: a misspelt field (``migrat``) would else be
    # dropped without a word and the agent would play without it.
    unknown = sorted(set(doc) - set(FIELDS))
    if unknown:
        raise PriorityCheckpointError(f"{path}: field {unknown[0]} is not a field of a priority agent file "
                                      f"(fields: {', '.join(FIELDS)})")
    weights = doc.get("weights")
    unknown = sorted(set(weights) - set(WEIGHT_FIELDS)) if isinstance(weights, dict) else []
    if unknown:
        raise PriorityCheckpointError(f"{path}: field weights.{unknown[0]} is not a weight of a priority agent "
                                      f"(weights: {', '.join(WEIGHT_FIELDS)})")
    if type(doc.get("version")) is not int or doc["version"] != VERSION:
        raise PriorityCheckpointError(f"{path}: field version is {doc.get('version')!r}, this package reads "
                                      f"{VERSION} (an integer)")
    if doc.get("features") != list(PRIORITY_FEATURES):
        raise PriorityCheckpointError(f"{path}: field features {doc.get('features')!r} differs from this "
                                      f"package's {list(PRIORITY_FEATURES)}")
    f, q = len(PRIORITY_FEATURES), len(PLACER_FEATURES)
    try:
        h = len(doc["weights"]["out"])
    except (KeyError, TypeError):
        raise PriorityCheckpointError(f"{path}: field weights.out is missing") from None
    if not isinstance(doc["weights"], dict) or not isinstance(doc["weights"]["out"], list):
        raise PriorityCheckpointError(f"{path}: field weights.out must be a list of numbers")
    # Files written before the residual placer existed have neither field: the heuristic placer.
    if doc.get("placer_features", list(PLACER_FEATURES)) != list(PLACER_FEATURES):
        raise PriorityCheckpointError(f"{path}: field placer_features {doc.get('placer_features')!r} differs "
                                      f"from this package's {list(PLACER_FEATURES)}")
    placer = _array(doc, "placer", (q,), path) if "placer" in doc["weights"] else np.zeros(q)
    model = PriorityModel(_array(doc, "linear", (f,), path), _array(doc, "hidden_w", (h, f), path),
                          _array(doc, "hidden_b", (h,), path), _array(doc, "out", (h,), path), placer)
    training = doc.get("training", {})
    if not isinstance(training, dict):
        raise PriorityCheckpointError(f"{path}: field training must be an object, got {training!r}")
    try:
        migrate = check_migrate(doc.get("migrate"))
    except ValueError as exc:
        raise PriorityCheckpointError(f"{path}: field {exc}") from None
    spec = PriorityAgentSpec(scenario=_text(doc, "scenario", path), placer=_text(doc, "placer", path, "fastest"),
                             preempt_at=_text(doc, "preempt_at", path, "tick"), training=dict(training),
                             migrate=None if migrate is None else float(migrate))
    if scenario is not None and spec.scenario != scenario:
        raise PriorityCheckpointError(f"{path}: trained for scenario {spec.scenario!r}, not {scenario!r}")
    try:
        return PriorityAgentPolicy(model, spec, name=name)
    except ValueError as exc:
        raise PriorityCheckpointError(f"{path}: {exc}") from None
