"""Trained agents as policies of the harness: a saved file on the ``cluster-bench`` line, one call in Python.

An agent trained on a single-agent view (Stable-Baselines3 ``PPO`` / sb3-contrib ``MaskablePPO``
on ``cluster_env/HeteroClusterFlat-v1`` or ``make_vec_env``, a model trained through
``supersuit_vec_env``) or a CleanRL-style torch module (flat observation -> logits) is scored
next to the baselines, under the settings it was trained with::

    baselines.save_agent(model, "ppo_model.zip", env)      # env: what it was trained on
    # cluster-bench run --policies fifo,tiresias,ppo_model.zip
    baselines.score_agent("ppo_model.zip")                 # the same table, ratios and CIs, in Python

:func:`save_agent` writes the model (SB3's own ``.zip``; a torch module as a TorchScript
``.zip``) and, beside it, ``<name>.agent.json``: the scenario, the view's layout (flat, or with
the agent one-hot of the SuperSuit and vector-env paths), the rule for forbidden actions
(``invalid_action``, ``"fallback"`` by default, as in the views), the space-shaping scheduling
settings and the algorithm class. :func:`load_agent` (also the ``cluster_bench.resolvers`` entry
point for names ending in ``.zip``) reads them back; a plain ``model.save("ppo_model")`` without
that file still loads: the algorithm is read from the zip (``MaskablePPO`` when its policy is
maskable, else ``PPO``), the view's defaults and the run's scenario are assumed, and a model whose
observation size fits neither layout of that scenario is refused with both shapes.

Loading a file runs no code from it unless the user trusts it (:mod:`baselines.model_trust`): an
SB3 model is rebuilt from its parameters and plain JSON (:mod:`baselines.model_files`); one that
needs SB3's unpickling loader, and a TorchScript module, need ``trust_model=True`` (the command
line's ``--trust-model``). The settings file is checked against its schema, each error one line
naming the file and the field.

Imports torch and stable-baselines3 only when a model is loaded or saved (the ``rl`` extra); without
them the error is one line naming ``pip install '.[rl]'``.
"""
from __future__ import annotations

import json
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Optional, Sequence

from baselines.model_files import (SAFE_SB3_POLICIES, ModelFileError, ModelZip, NeedsCode, check_finite,
                                   open_model_zip, rebuild_sb3_policy, safe_algorithms, shorten, torch_error)
from baselines.model_trust import TRUST_RISK, UntrustedModelError, model_trusted, trusted_models
from cluster_env.extras import RL_HINT, MissingExtraError

#: Format of the ``<name>.agent.json`` file beside a saved agent.
AGENT_FORMAT, AGENT_VERSION = "cluster-bench-agent", 1
#: Suffix of that file: ``ppo_model.zip`` -> ``ppo_model.agent.json``.
SIDECAR_SUFFIX = ".agent.json"
_RL_HINT = f"{RL_HINT} (torch, stable-baselines3, sb3-contrib)"


def sidecar_path(path: "str | Path") -> Path:
    """Where the settings of the agent saved at ``path`` are written."""
    path = Path(path)
    return path.with_name(path.stem + SIDECAR_SUFFIX)


def _need(module: str, what: str) -> Any:
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingExtraError(f"{what} needs {module.split('.')[0]} ({exc}): {_RL_HINT}") from None


def save_agent(model: Any, path: "str | Path", env: Any, scenario: Optional[str] = None,
               label: Optional[str] = None) -> Path:
    """Save a trained agent and the settings it must be scored with; returns the model's path.

    Args:
        model: an SB3 / sb3-contrib model (``PPO``, ``MaskablePPO``, ...) or a torch module mapping
            a batch of flat observations ``(B, F)`` to logits ``(B, A)``.
        path: the file to write (``.zip`` is added when missing); the settings go to
            :func:`sidecar_path`.
        env: what the agent was trained on: a flat view (or its ``gymnasium.make``),
            ``make_vec_env``, ``supersuit_vec_env``, ``ClusterVectorEnv`` or ``ClusterSB3VecEnv``.
        scenario: the scenario's name when ``env`` cannot tell (a custom ``Scenario`` object).
        label: what the harness calls it, ``LABEL(file stem)`` (default: the model's class name;
            an SB3 model is loaded with that class, so give a label to torch modules only).
    """
    from baselines.harness.files import atomic_write
    from cluster_env.wrappers.flat_policy import view_scenario, view_settings, view_signature

    layout, n_actions = view_signature(env)
    path = Path(path)
    if path.suffix != ".zip":
        path = path.with_name(path.name + ".zip")
    path.parent.mkdir(parents=True, exist_ok=True)
    if callable(getattr(model, "predict", None)) and hasattr(model, "policy"):
        if label is not None:
            raise ValueError("label= names torch modules; an SB3 model is recorded by its class (e.g. MaskablePPO)")
        kind, algorithm = "sb3", type(model).__name__
        atomic_write(path, model.save, binary=True)     # SB3 writes its zip into the file object
    else:
        torch = _need("torch", "saving a torch policy")
        kind, algorithm = "torch", label or type(model).__name__
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)    # TorchScript: deprecated, still the portable file
            traced = torch.jit.trace(model.eval(), torch.zeros(1, layout.size))
        atomic_write(path, lambda fh: torch.jit.save(traced, fh), binary=True)
    meta = {"format": AGENT_FORMAT, "version": AGENT_VERSION, "kind": kind, "algorithm": algorithm,
            "scenario": scenario or view_scenario(env), "env_overrides": view_settings(env),
            "obs_size": int(layout.size), "n_actions": int(n_actions), "agent_ids": "agent" in layout.shapes}
    atomic_write(sidecar_path(path), lambda f: f.write(json.dumps(meta, indent=2)))
    return path


#: Versions of the settings file this package reads.
SUPPORTED_AGENT_VERSIONS = (AGENT_VERSION,)
#: A settings file larger than this is refused before it is read (save_agent writes ~400 bytes).
MAX_SIDECAR_BYTES = 2**20
_AGENT_KEYS = {"format", "version", "kind", "algorithm", "scenario", "env_overrides", "obs_size", "n_actions",
               "agent_ids"}
_REQUIRED_KEYS = ("kind", "obs_size", "n_actions", "env_overrides")
_ALGORITHM = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,63}")


def read_agent_settings(path: "str | Path") -> Optional[dict]:
    """The settings :func:`save_agent` wrote beside ``path`` (None when there are none), checked
    against their schema: every error is one line naming the file and the field."""
    side = sidecar_path(path)
    if not side.is_file():
        return None
    try:
        if side.stat().st_size > MAX_SIDECAR_BYTES:
            raise ModelFileError(f"{side}: {side.stat().st_size:,} bytes; an agent settings file has at most "
                                 f"{MAX_SIDECAR_BYTES:,}")
        meta = json.loads(side.read_text())
    except RecursionError:
        raise ModelFileError(f"{side}: nested too deeply for the JSON reader; not an agent settings file") from None
    except (OSError, ValueError) as exc:
        if isinstance(exc, ModelFileError):
            raise
        raise ModelFileError(f"{side}: not a readable agent settings file ({exc})") from None
    if not isinstance(meta, dict) or meta.get("format") != AGENT_FORMAT:
        raise ModelFileError(f"{side}: not an agent settings file (format {AGENT_FORMAT!r} expected)")
    check_agent_settings(meta, side)
    return meta


def check_agent_settings(meta: dict, side: "str | Path") -> None:
    """Raise :class:`ModelFileError` naming ``side`` and the field unless ``meta`` follows the
    schema of :func:`save_agent`'s file: types, allowed values and a supported version."""
    from cluster_env.wrappers.flat_policy import VIEW_INTERFACE_KEYS

    def bad(field: str, why: str) -> ModelFileError:
        return ModelFileError(f"{side}: field {field!r} {why}; save the agent again with baselines.save_agent")

    unknown = sorted(set(meta) - _AGENT_KEYS)
    if unknown:
        raise bad(unknown[0], f"is not a field of an agent settings file (fields: {', '.join(sorted(_AGENT_KEYS))})")
    version = meta.get("version")
    if isinstance(version, bool) or version not in SUPPORTED_AGENT_VERSIONS:
        raise bad("version", f"is {version!r}; this package reads version "
                             f"{', '.join(map(str, SUPPORTED_AGENT_VERSIONS))}")
    for key in _REQUIRED_KEYS:
        if key not in meta:
            raise bad(key, "is missing")
    if meta["kind"] not in ("sb3", "torch"):
        raise bad("kind", f"is {meta['kind']!r}, not 'sb3' (a Stable-Baselines3 model) or 'torch' (a TorchScript "
                          "module)")
    algorithm = meta.get("algorithm")
    if algorithm is not None:
        if not isinstance(algorithm, str):
            raise bad("algorithm", f"is {algorithm!r}, not a name")
        if meta["kind"] == "sb3" and not _ALGORITHM.fullmatch(algorithm):
            raise bad("algorithm", f"is {shorten(algorithm, 80)!r}, not the name of a Stable-Baselines3 class "
                                   "(e.g. PPO, MaskablePPO)")
        if meta["kind"] == "torch" and (not algorithm.isprintable() or not 0 < len(algorithm) <= 100):
            raise bad("algorithm", "(the label of a torch module) must be 1 to 100 printable characters")
    scenario = meta.get("scenario")
    if scenario is not None:
        import cluster_env

        if not isinstance(scenario, str) or scenario not in cluster_env.list_scenarios():
            raise bad("scenario", f"is {shorten(str(scenario), 80)!r}, not a registered scenario "
                                  "(cluster-bench scenarios lists them)")
    for key in ("obs_size", "n_actions"):
        value = meta[key]
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise bad(key, f"is {value!r} ({type(value).__name__}), not a positive integer")
    if "agent_ids" in meta and not isinstance(meta["agent_ids"], bool):
        raise bad("agent_ids", f"is {meta['agent_ids']!r}, not true or false")
    overrides = meta["env_overrides"]
    if not isinstance(overrides, dict):
        raise bad("env_overrides", f"is a {type(overrides).__name__}, not an object")
    for key, value in overrides.items():
        if key not in VIEW_INTERFACE_KEYS:
            raise bad(f"env_overrides.{key}", f"is not a setting an agent records (those are: "
                                              f"{', '.join(VIEW_INTERFACE_KEYS)})")
        if not isinstance(value, (bool, int, float, str)):
            raise bad(f"env_overrides.{key}", f"is {shorten(str(value), 80)!r}, not a number, string or boolean")


def _layout(scenario: str, env_overrides: dict, agent_ids: bool):
    """The flat layout (and its action count) of ``scenario`` under the agent's settings."""
    import cluster_env
    from cluster_env.envs.flat_layout import FlatLayout

    env = cluster_env.parallel_env(scenario, split="test", **env_overrides)
    n = max(env.action_space(a).n for a in env.possible_agents)
    return FlatLayout(env.observation_space("orderer"), n, num_agents=2 if agent_ids else 0), n


def _agent_layout(path: Path, model: ModelZip, meta: dict, trained_on: str, overrides: dict):
    """(layout, action count, whether it has the agent one-hot) the agent at ``path`` acts on."""
    try:
        if meta:
            layout, n = _layout(trained_on, overrides, bool(meta.get("agent_ids")))
        else:
            layout, n = _layout(trained_on, overrides, False)
    except (TypeError, ValueError) as exc:
        where = f"{sidecar_path(path)}: field 'env_overrides'" if meta else f"{path}"
        raise ModelFileError(f"{where}: {exc}") from None
    if meta:
        if (layout.size, n) != (meta["obs_size"], meta["n_actions"]):
            raise ModelFileError(
                f"{sidecar_path(path)}: the agent's observation ({meta['obs_size']},) and {meta['n_actions']} actions "
                f"do not match scenario {trained_on!r} with its recorded settings ({layout.size},) / {n}; save the "
                "agent again with baselines.save_agent")
        if model.kind == "sb3" and (model.obs_size, model.n_actions) != (layout.size, n):
            raise ModelFileError(
                f"{path}: the model's spaces (({model.obs_size},), {model.n_actions} actions, in its 'data' entry) "
                f"differ from its settings file's (({layout.size},), {n}): the two files do not belong together")
        return layout, n, bool(meta.get("agent_ids"))
    size = model.obs_size
    agent_ids = size is not None and size == layout.size + 2
    if agent_ids:
        layout, n = _layout(trained_on, overrides, True)
    elif size is not None and size != layout.size:
        raise ModelFileError(f"{path.name} takes flat observations of shape ({size},) but {trained_on} gives "
                             f"({layout.size},) (({layout.size + 2},) with the agent one-hot): it was trained on "
                             f"another scenario or settings; score it there (--scenario NAME), or save it with "
                             f"baselines.save_agent(model, path, env), which records them")
    if model.n_actions is not None and model.n_actions != n:
        raise ModelFileError(f"{path.name} chooses among {model.n_actions} actions but {trained_on} has {n}: it was "
                             "trained on another scenario or settings; score it there (--scenario NAME)")
    return layout, n, agent_ids


def load_agent(path: "str | Path", scenario: Optional[str] = None, algorithm: Optional[str] = None,
               invalid_action: Optional[str] = None, deterministic: bool = True,
               name: Optional[str] = None, trust_model: Optional[bool] = None) -> Any:
    """A saved agent as a policy of the harness (a :class:`cluster_env.wrappers.FlatViewPolicy`).

    Loading runs no code from the file: an SB3 model (PPO, A2C, MaskablePPO with their MLP
    policy) is rebuilt from its parameters (``weights_only``) and the plain JSON of its zip
    (:mod:`baselines.model_files`). A model that only SB3's unpickling ``load`` can build, and a
    TorchScript module (whose program runs when loaded), need ``trust_model=True``; without it
    :class:`baselines.model_trust.UntrustedModelError` names the file and the flag.

    Args:
        path: a ``.zip`` written by :func:`save_agent`, or SB3's own ``model.save`` file.
        scenario: the run's scenario: where the agent is scored when its settings file does not
            name the one it was trained on (default: the benchmark's, ``philly-v1``).
        algorithm: the SB3 class to load with (default: recorded, else read from the zip).
        invalid_action: the rule for forbidden actions (default: recorded, else ``"fallback"``,
            the views' default).
        deterministic: SB3 models act greedily (default) or sample.
        name: the name the harness reports (default ``ALGORITHM(file stem)``).
        trust_model: let the file run code when loaded (default: trusted only inside
            :func:`baselines.model_trust.trusted_models`, i.e. ``cluster-bench --trust-model``).
    """
    from cluster_env.scenarios.registry import DEFAULT_SCENARIO
    from cluster_env.wrappers.flat_policy import FlatViewPolicy, sb3_predict, torch_predict

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such agent file (save one with baselines.save_agent(model, path, env))")
    trusted = model_trusted(trust_model)
    model = open_model_zip(path)
    meta = read_agent_settings(path) or {}
    if meta and meta["kind"] != model.kind:
        raise ModelFileError(f"{sidecar_path(path)}: field 'kind' is {meta['kind']!r} but {path.name} is a "
                             f"{'Stable-Baselines3 model' if model.kind == 'sb3' else 'TorchScript module'} "
                             f"({model.kind!r}); the two files do not belong together")
    if algorithm is not None and not _ALGORITHM.fullmatch(str(algorithm)):
        raise ValueError(f"algorithm={algorithm!r} is not the name of a Stable-Baselines3 class (e.g. PPO)")
    overrides = dict(meta.get("env_overrides") or {"invalid_action": "fallback"})
    if invalid_action is not None:
        overrides["invalid_action"] = invalid_action
    trained_on = meta.get("scenario") or scenario or DEFAULT_SCENARIO
    layout, n, _ = _agent_layout(path, model, meta, trained_on, overrides)
    torch = _need("torch", f"scoring {path.name}")
    torch.set_num_threads(1)
    if model.kind == "torch":
        if not trusted:
            raise UntrustedModelError(path, "a TorchScript module (its program runs when loaded)")
        label = meta.get("algorithm") or "torch"
        predict = torch_predict(_load_torchscript(path, trust_model), source=str(path))
    else:
        label = algorithm or meta.get("algorithm") or model.algorithm or "PPO"
        family = safe_algorithms(model)
        if family and label not in family:
            where = "algorithm=" if algorithm else f"{sidecar_path(path)}: field 'algorithm'"
            raise ModelFileError(f"{where} is {label!r} but {path.name} holds a {SAFE_SB3_POLICIES[family[0]][1]}, "
                                 f"the policy of {' / '.join(family)}; the two do not belong together")
        predict = sb3_predict(_sb3_policy(path, model, label, layout, n, trusted, trust_model), deterministic)
    return FlatViewPolicy(predict, layout, n, name=name or f"{label}({path.stem})", env_overrides=overrides,
                          scenario=trained_on)


def _sb3_policy(path: Path, model: ModelZip, algorithm: str, layout: Any, n: int, trusted: bool,
                trust_model: Optional[bool]) -> Any:
    """The SB3 policy (or, trusted, the model SB3's ``load`` gives) that acts for the agent."""
    package = SAFE_SB3_POLICIES.get(algorithm, ("stable_baselines3",))[0].split(".")[0]
    _need(package, f"loading {path.name}")
    from gymnasium import spaces

    try:
        return rebuild_sb3_policy(model, algorithm, layout.space, spaces.Discrete(n))
    except NeedsCode as why:
        if not trusted:
            raise UntrustedModelError(path, f"a Stable-Baselines3 model that only SB3's unpickling loader can build "
                                            f"({why.args[0]})") from None
    _warn_trusted(path, trust_model)
    return _load_sb3(path, algorithm)


def _warn_trusted(path: Path, trust_model: Optional[bool]) -> None:
    # The command line warns once for the whole command (--trust-model); Python callers here.
    if trust_model:
        warnings.warn(f"{path}: loaded with trust_model=True: {TRUST_RISK}", UserWarning, stacklevel=4)


def _load_torchscript(path: Path, trust_model: Optional[bool]) -> Any:
    import torch

    _warn_trusted(path, trust_model)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            module = torch.jit.load(str(path), map_location="cpu").eval()
    except Exception as exc:  # noqa: BLE001 - torch raises many kinds for a foreign or broken file
        raise ModelFileError(f"{path}: not a loadable TorchScript module ({torch_error(exc)})") from None
    check_finite(path, dict(module.state_dict()))
    return module


def _load_sb3(path: Path, algorithm: str) -> Any:
    """SB3's own ``load`` (it unpickles the zip's ``data``: trusted files only)."""
    from stable_baselines3.common.base_class import BaseAlgorithm

    for module in ("sb3_contrib", "stable_baselines3"):
        package = _need(module, f"loading {path.name}")
        cls = getattr(package, algorithm, None)
        if isinstance(cls, type) and issubclass(cls, BaseAlgorithm):
            try:
                return cls.load(str(path), device="cpu")
            except Exception as exc:  # noqa: BLE001 - SB3 raises many kinds for a file of another class
                raise ModelFileError(f"{path}: {algorithm}.load failed ({torch_error(exc)})") from None
    raise ModelFileError(f"{path}: unknown algorithm {algorithm!r} (a class of stable_baselines3 or sb3_contrib, "
                         "e.g. PPO or MaskablePPO)")


def resolve_agent(name: str, scenario: Optional[str] = None) -> Any:
    """Entry point ``cluster_bench.resolvers``: a saved agent for names ending in ``.zip`` (None
    for any other name), trusted only inside :func:`baselines.model_trust.trusted_models`."""
    if not isinstance(name, str) or not name.lower().endswith(".zip"):
        return None
    return load_agent(name, scenario=scenario)


@dataclass
class AgentScore:
    """What :func:`score_agent` measured: every episode's record, the per-policy summary rows
    (means, paired ratios to ``reference`` with their 95% intervals and win rates) and the table
    ``cluster-bench run`` prints (``str(score)``)."""

    records: list
    summary: list
    table: str
    agent: str
    reference: str
    extra: dict = field(default_factory=dict)

    def __str__(self) -> str:
        return self.table


def score_agent(agent: Any, env: Any = None, policies: Sequence[str] = (), scenario: Optional[str] = None,
                split: str = "test", seeds: Iterable[int] = range(20), env_kwargs: Optional[dict] = None,
                reference: Optional[str] = None, backend: str = "auto", workers: Optional[int] = None,
                progress: bool = False, trust_model: bool = False, metric: str = "avg_jct") -> AgentScore:
    """Score a trained agent next to the baselines on the same windows, in one call.

    Args:
        agent: a saved agent's path (:func:`save_agent`), an SB3 model or a torch module (with
            ``env``, what it was trained on), or any policy object.
        env: the training env of an in-memory model or module.
        policies: the baselines to compare with (default: the named baselines of ``cluster-bench run``).
        scenario: default the one the agent was trained on, else the benchmark's (``philly-v1``).
        split, seeds, env_kwargs, backend, workers, progress: as :func:`baselines.evaluate`
            (default: the test split's windows 0-19, as ``cluster-bench run``).
        reference: the policy of the paired ratios (default: the scenario's yardstick on ``metric``,
            :func:`baselines.yardstick.yardstick`; added when missing).
        trust_model: let the agent's file run code when loaded, here and in the episode workers
            (see :func:`load_agent`; only for a file you made or trust).
        metric: the metric of the table's paired ratio (default average JCT).
    """
    if trust_model and isinstance(agent, (str, Path)):
        warnings.warn(f"{agent}: scored with trust_model=True: {TRUST_RISK}", UserWarning, stacklevel=2)
    with trusted_models(trust_model):
        return _score_agent(agent, env, policies, scenario, split, seeds, env_kwargs, reference, backend, workers,
                            progress, metric)


def _score_agent(agent: Any, env: Any, policies: Sequence[str], scenario: Optional[str], split: str,
                 seeds: Iterable[int], env_kwargs: Optional[dict], reference: Optional[str], backend: str,
                 workers: Optional[int], progress: bool, metric: str = "avg_jct") -> AgentScore:
    from baselines.harness.episode import policy_name
    from baselines.harness.report import format_table, summarize
    from baselines.harness.sweep import make_tasks, run_tasks
    from baselines.registry import BASELINE_NAMES
    from cluster_env.scenarios.registry import DEFAULT_SCENARIO
    from cluster_env.wrappers.flat_policy import FlatViewPolicy

    spec: Any = agent
    if isinstance(agent, Path):
        spec = str(agent)
    if isinstance(spec, str):
        policy = load_agent(spec, scenario=scenario)
    elif callable(getattr(agent, "act", None)):
        policy = agent
    elif env is None:
        raise TypeError("score_agent(model, env): an in-memory model or module needs the env it was trained on "
                        "(or save it with baselines.save_agent and pass the path)")
    elif callable(getattr(agent, "predict", None)) and hasattr(agent, "policy"):
        policy = spec = FlatViewPolicy.from_sb3(agent, env, name=type(agent).__name__)
    else:
        policy = spec = FlatViewPolicy.from_torch(agent, env)
    scenario = scenario or getattr(policy, "scenario", None) or DEFAULT_SCENARIO
    names = list(policies) or list(BASELINE_NAMES)
    if reference is None:
        from baselines.yardstick import yardstick

        reference = yardstick(scenario, metric)
    if reference not in names:
        names.insert(0, reference)
    seeds = list(seeds)
    tasks = make_tasks([spec, *names], [scenario], split, seeds, env_kwargs)
    records = [r.record for r in run_tasks(tasks, backend=backend, workers=workers, progress=progress)]
    from baselines.harness.report import PAIRED_METRICS, TABLE_METRICS

    paired = tuple(dict.fromkeys((*PAIRED_METRICS, metric)))
    shown = tuple(dict.fromkeys((metric, *TABLE_METRICS))) if metric != "avg_jct" else TABLE_METRICS
    return AgentScore(records=records, summary=summarize(records, reference=reference, paired_metrics=paired),
                      table=format_table(records, shown, reference=reference, paired_metric=metric),
                      agent=policy_name(policy),
                      reference=reference)


__all__ = ["AGENT_FORMAT", "AgentScore", "MAX_SIDECAR_BYTES", "SUPPORTED_AGENT_VERSIONS", "check_agent_settings",
           "load_agent", "read_agent_settings", "resolve_agent", "save_agent", "score_agent", "sidecar_path"]
