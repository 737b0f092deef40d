"""Scheduling baselines for ``cluster_env`` and the harness that scores any policy.

Quick start::

    import baselines
    records = baselines.evaluate("tiresias", "philly-v0", split="test", seeds=range(5))
    policy = baselines.make_policy("sjf+fastest")   # any ORDERER+PLACER

A trained agent (SB3 / sb3-contrib model, CleanRL-style torch module) is scored next to them with
``baselines.save_agent(model, "agent.zip", env)`` then ``cluster-bench run --policies
fifo,agent.zip`` or ``baselines.score_agent("agent.zip")`` (:mod:`baselines.trained`).

A policy is any object with ``act(observations, infos)`` and ``reset(seed)``; baselines act only
through the environment's observations, masks and infos, exactly as an RL agent does.
"""
from baselines import startup as _startup  # noqa: F401  (first: Ctrl-C while the command line starts is one line, exit 130)
from baselines.harness import evaluate, register_policy_resolver, resolve_policy, run_episode
from baselines.model_trust import trusted_models
from baselines.orderers import FIFO, SJF, ClairvoyanceRequired, RandomOrderer, Tiresias
from baselines.placers import BestFit, FastestFirst, FirstFit, RandomPlacer, Spread
from baselines.policy import ComposedPolicy, Orderer, Placer, Policy
from baselines.registry import BASELINE_NAMES, ORDERERS, PLACERS, make_policy, policy_names
from baselines.trained import load_agent, save_agent, score_agent

__all__ = [
    "BASELINE_NAMES", "BestFit", "ClairvoyanceRequired", "ComposedPolicy", "FIFO", "FastestFirst", "FirstFit",
    "ORDERERS", "Orderer", "PLACERS", "Placer", "Policy", "RandomOrderer", "RandomPlacer", "SJF", "Spread",
    "Tiresias", "evaluate", "load_agent", "make_policy", "policy_names", "register_policy_resolver", "resolve_policy",
    "run_episode", "save_agent", "score_agent", "trusted_models",
]
