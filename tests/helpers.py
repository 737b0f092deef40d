"""Shared test helpers: masked random actions and episode loops through the public API."""
from __future__ import annotations

import numpy as np


def random_actions(obs: dict, rng: np.random.Generator, lazy: float = 0.0) -> dict:
    """A uniformly random allowed action for every agent.

    With probability ``lazy`` an agent takes its last action (advance / no-op) when allowed, so
    that random preempting policies still move the clock forward in tests.
    """
    out = {}
    for agent, o in obs.items():
        mask = o["action_mask"]
        if lazy and mask[-1] and rng.random() < lazy:
            out[agent] = len(mask) - 1
        else:
            out[agent] = int(rng.choice(np.flatnonzero(mask)))
    return out


def first_allowed_actions(obs: dict) -> dict:
    """FIFO + first-fit through the masks alone: the lowest allowed index for every agent.

    In ORDER the lowest allowed index is the oldest fitting pending job (or advance); in PLACE it
    is the lowest-numbered machine with a usable free GPU.
    """
    return {agent: int(np.flatnonzero(o["action_mask"])[0]) for agent, o in obs.items()}


def run_episode(env, policy, seed: int = 0, max_steps: int = 1_000_000, on_step=None):
    """Run one episode; returns (total reward, steps, final infos)."""
    obs, infos = env.reset(seed=seed)
    total, steps = 0.0, 0
    while env.agents:
        actions = policy(obs)
        obs, rewards, terms, truncs, infos = env.step(actions)
        total += rewards["orderer"]
        steps += 1
        if on_step is not None:
            on_step(env, obs, rewards, terms, truncs, infos)
        if steps >= max_steps:
            raise AssertionError("episode did not end")
    return total, steps, infos
