"""Trained agents as policies of the harness: a saved file on the ``cluster-bench`` line, one call in Python.

An agent trained on a single-agent view (Stable-Baselines3 ``PPO`` / sb3-contrib ``MaskablePPO``
on ``cluster_env/HeteroClusterFlat-v0`` or ``make_vec_env``, a model trained through
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

Imports torch and stable-baselines3 only when a model is loaded or saved (the ``rl`` extra); without
them the error is one line naming ``pip install '.[rl]'``.
"""
from __future__ import annotations

import json
import warnings
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Optional, Sequence

#: Format of the ``<name>.agent.json`` file beside a saved agent.
AGENT_FORMAT, AGENT_VERSION = "cluster-bench-agent", 1
#: Suffix of that file: ``ppo_model.zip`` -> ``ppo_model.agent.json``.
SIDECAR_SUFFIX = ".agent.json"
_RL_HINT = "pip install '.[rl]' (torch, stable-baselines3, sb3-contrib)"


def sidecar_path(path: "str | Path") -> Path:
    """Where the settings of the agent saved at ``path`` are written."""
    path = Path(path)
    return path.with_name(path.stem + SIDECAR_SUFFIX)


def _need(module: str, what: str) -> Any:
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(f"{what} needs {module.split('.')[0]} ({exc}): {_RL_HINT}") from None


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
        model.save(path)
    else:
        torch = _need("torch", "saving a torch policy")
        kind, algorithm = "torch", label or type(model).__name__
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)    # TorchScript: deprecated, still the portable file
            torch.jit.save(torch.jit.trace(model.eval(), torch.zeros(1, layout.size)), str(path))
    meta = {"format": AGENT_FORMAT, "version": AGENT_VERSION, "kind": kind, "algorithm": algorithm,
            "scenario": scenario or view_scenario(env), "env_overrides": view_settings(env),
            "obs_size": int(layout.size), "n_actions": int(n_actions), "agent_ids": "agent" in layout.shapes}
    from baselines.harness.files import atomic_write

    atomic_write(sidecar_path(path), lambda f: f.write(json.dumps(meta, indent=2)))
    return path


def read_agent_settings(path: "str | Path") -> Optional[dict]:
    """The settings :func:`save_agent` wrote beside ``path`` (None when there are none)."""
    side = sidecar_path(path)
    if not side.is_file():
        return None
    try:
        meta = json.loads(side.read_text())
    except (OSError, ValueError) as exc:
        raise ValueError(f"{side}: not a readable agent settings file ({exc})") from None
    if not isinstance(meta, dict) or meta.get("format") != AGENT_FORMAT:
        raise ValueError(f"{side}: not an agent settings file (format {AGENT_FORMAT!r} expected)")
    for key in ("kind", "obs_size", "n_actions", "env_overrides"):
        if key not in meta:
            raise ValueError(f"{side}: field {key!r} is missing; save the agent again with baselines.save_agent")
    return meta


def _zip_kind(path: Path) -> tuple[str, Optional[str], Optional[int]]:
    """(``"sb3"`` or ``"torch"``, the SB3 algorithm it implies, its observation size) of a zip."""
    try:
        with zipfile.ZipFile(path) as z:
            names = z.namelist()
            if "data" in names:
                data = json.loads(z.read("data"))
                module = str(data.get("policy_class", {}).get("__module__", ""))
                shape = data.get("observation_space", {}).get("_shape") or [None]
                return "sb3", ("MaskablePPO" if "maskable" in module else "PPO"), shape[0]
            if any(n.endswith("constants.pkl") or n.endswith("/data.pkl") for n in names):
                return "torch", None, None
    except (zipfile.BadZipFile, ValueError) as exc:
        raise ValueError(f"{path}: not a Stable-Baselines3 model or TorchScript file ({exc})") from None
    raise ValueError(f"{path}: neither a Stable-Baselines3 model (no 'data' entry) nor a TorchScript module")


def _load_sb3(path: Path, algorithm: str) -> Any:
    for module in ("sb3_contrib", "stable_baselines3"):
        package = _need(module, f"loading {path.name}")
        cls = getattr(package, algorithm, None)
        if cls is not None:
            return cls.load(str(path), device="cpu")
    raise ValueError(f"{path}: unknown algorithm {algorithm!r} (a class of stable_baselines3 or sb3_contrib, "
                     "e.g. PPO or MaskablePPO)")


def _layout(scenario: str, env_overrides: dict, agent_ids: bool):
    """The flat layout (and its action count) of ``scenario`` under the agent's settings."""
    import cluster_env
    from cluster_env.wrappers.layout import FlatLayout

    env = cluster_env.parallel_env(scenario, split="test", **env_overrides)
    n = max(env.action_space(a).n for a in env.possible_agents)
    return FlatLayout(env.observation_space("orderer"), n, num_agents=2 if agent_ids else 0), n


def load_agent(path: "str | Path", scenario: Optional[str] = None, algorithm: Optional[str] = None,
               invalid_action: Optional[str] = None, deterministic: bool = True,
               name: Optional[str] = None) -> Any:
    """A saved agent as a policy of the harness (a :class:`cluster_env.wrappers.FlatViewPolicy`).

    Args:
        path: a ``.zip`` written by :func:`save_agent`, or SB3's own ``model.save`` file.
        scenario: the run's scenario: where the agent is scored when its settings file does not
            name the one it was trained on (default: the benchmark's, ``philly-v1``).
        algorithm: the SB3 class to load with (default: recorded, else read from the zip).
        invalid_action: the rule for forbidden actions (default: recorded, else ``"fallback"``,
            the views' default).
        deterministic: SB3 models act greedily (default) or sample.
        name: the name the harness reports (default ``ALGORITHM(file stem)``).
    """
    from cluster_env.scenarios.registry import DEFAULT_SCENARIO
    from cluster_env.wrappers.flat_policy import FlatViewPolicy, sb3_predict, torch_predict

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such agent file (save one with baselines.save_agent(model, path, env))")
    kind, guessed, size = _zip_kind(path)
    meta = read_agent_settings(path) or {}
    overrides = dict(meta.get("env_overrides") or {"invalid_action": "fallback"})
    if invalid_action is not None:
        overrides["invalid_action"] = invalid_action
    trained_on = meta.get("scenario") or scenario or DEFAULT_SCENARIO
    if meta:
        agent_ids = bool(meta.get("agent_ids"))
        layout, n = _layout(trained_on, overrides, agent_ids)
        if (layout.size, n) != (meta["obs_size"], meta["n_actions"]):
            raise ValueError(f"{sidecar_path(path)}: the agent's observation ({meta['obs_size']},) and "
                             f"{meta['n_actions']} actions do not match scenario {trained_on!r} with its recorded "
                             f"settings ({layout.size},) / {n}; save the agent again with baselines.save_agent")
    else:
        layout, n = _layout(trained_on, overrides, False)
        agent_ids = size is not None and size == layout.size + 2
        if agent_ids:
            layout, n = _layout(trained_on, overrides, True)
        elif size is not None and size != layout.size:
            raise ValueError(f"{path.name} takes flat observations of shape ({size},) but {trained_on} gives "
                             f"({layout.size},) (({layout.size + 2},) with the agent one-hot): it was trained on "
                             f"another scenario or settings; score it there (--scenario NAME), or save it with "
                             f"baselines.save_agent(model, path, env), which records them")
    torch = _need("torch", f"scoring {path.name}")
    torch.set_num_threads(1)
    if (meta.get("kind") or kind) == "torch":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            module = torch.jit.load(str(path), map_location="cpu").eval()
        label = meta.get("algorithm") or "torch"
        predict = torch_predict(module)
    else:
        label = algorithm or meta.get("algorithm") or guessed or "PPO"
        predict = sb3_predict(_load_sb3(path, label), deterministic)
    return FlatViewPolicy(predict, layout, n, name=name or f"{label}({path.stem})", env_overrides=overrides,
                          scenario=trained_on)


def resolve_agent(name: str, scenario: Optional[str] = None) -> Any:
    """Entry point ``cluster_bench.resolvers``: a saved agent for names ending in ``.zip`` (None
    for any other name)."""
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
                progress: bool = False) -> AgentScore:
    """Score a trained agent next to the baselines on the same windows, in one call.

    Args:
        agent: a saved agent's path (:func:`save_agent`), an SB3 model or a torch module (with
            ``env``, what it was trained on), or any policy object.
        env: the training env of an in-memory model or module.
        policies: the baselines to compare with (default: the named baselines of ``cluster-bench run``).
        scenario: default the one the agent was trained on, else the benchmark's (``philly-v1``).
        split, seeds, env_kwargs, backend, workers, progress: as :func:`baselines.evaluate`
            (default: the test split's windows 0-19, as ``cluster-bench run``).
        reference: the policy of the paired ratios (default: the scenario's yardstick,
            :mod:`baselines.yardstick`; added when missing).
    """
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

        reference = yardstick(scenario)
    if reference not in names:
        names.insert(0, reference)
    seeds = list(seeds)
    tasks = make_tasks([spec, *names], [scenario], split, seeds, env_kwargs)
    records = [r.record for r in run_tasks(tasks, backend=backend, workers=workers, progress=progress)]
    return AgentScore(records=records, summary=summarize(records, reference=reference),
                      table=format_table(records, reference=reference), agent=policy_name(policy),
                      reference=reference)


__all__ = ["AGENT_FORMAT", "AgentScore", "load_agent", "read_agent_settings", "resolve_agent", "save_agent",
           "score_agent", "sidecar_path"]
