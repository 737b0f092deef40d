"""``baselines.evaluate``: score one policy on one scenario over seeds."""
from __future__ import annotations

from typing import Any, Iterable, Optional

from baselines.harness.sweep import PolicySpec, make_tasks, run_tasks
from cluster_env.scenarios.registry import DEFAULT_SCENARIO


def evaluate(policy: PolicySpec, scenario: str = DEFAULT_SCENARIO, split: str = "test",
             seeds: Iterable[int] = range(5), env_kwargs: Optional[dict] = None,
             backend: str = "auto", workers: Optional[int] = None, progress: bool = False,
             allow_env_mismatch: bool = False) -> list[dict[str, Any]]:
    """Run ``policy`` for one episode per seed and return one result record per seed.

    Args:
        policy: a baseline name (``"fifo"``, ``"sjf+fastest"``, ...) or any object with
            ``act(observations, infos)`` and ``reset(seed)``; its ``env_overrides`` (if any) are
            applied to the environment.
        scenario: a registered scenario name (``cluster_env.list_scenarios()``; default the
            benchmark's, ``cluster_env.DEFAULT_SCENARIO``, ``philly-v1``).
        split: ``train``, ``validation`` or ``test``.
        seeds: one episode per seed; the seed drives the environment and the policy.
        env_kwargs: environment overrides (see ``cluster_env.parallel_env``).
        backend: ``auto``, ``serial``, ``process`` or ``ray`` (see :func:`run_tasks`).
        workers: parallel workers.
        progress: show a progress bar.
        allow_env_mismatch: score a policy made for another environment (e.g. a checkpoint's
            training ``jobs_per_episode``) on this one anyway; otherwise that is an error.

    Returns:
        A list of dicts, one per seed in the order given: ``policy``, ``scenario``, ``split``,
        ``seed``, every key of ``cluster_env.METRIC_KEYS``, ``return``, ``steps`` and ``wall_s``.
    """
    tasks = make_tasks([policy], [scenario], split, list(seeds), env_kwargs, allow_env_mismatch=allow_env_mismatch)
    return [r.record for r in run_tasks(tasks, backend=backend, workers=workers, progress=progress)]
