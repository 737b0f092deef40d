"""Many policies x scenarios x seeds, run serially, on local processes, or on a Ray cluster.

Every task is independent and fully seeded, so the backend changes the wall time, never a number.
Policies travel to workers as names (resolved there by :func:`resolve_policy`) or as picklable
objects.
"""
from __future__ import annotations

import os
import pickle
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Optional, Sequence, Union

from baselines.harness.episode import EpisodeResult, run_episode

PolicySpec = Union[str, Any]
BACKENDS = ("auto", "serial", "process", "ray")

# Extra name resolvers registered by other packages (e.g. the dual agent's "dual" policy).
_RESOLVERS: list[Callable[[str, Optional[str]], Optional[Any]]] = []


def register_policy_resolver(resolver: Callable[[str, Optional[str]], Optional[Any]]) -> None:
    """Let ``resolve_policy`` build more names: ``resolver(name, scenario)`` returns a policy or None.

    ``scenario`` is the scenario the policy will run on (None when unknown), so that a name like
    ``"dual"`` can load the checkpoint trained for it.
    """
    if resolver not in _RESOLVERS:
        _RESOLVERS.append(resolver)


def resolve_policy(spec: PolicySpec, scenario: Optional[str] = None) -> Any:
    """A policy object from a name (baseline, composition, or a registered resolver's) or an object.

    ``scenario`` is passed to the registered resolvers (e.g. ``"dual"`` loads its checkpoint).
    """
    if not isinstance(spec, str):
        return spec
    from baselines.registry import make_policy

    if ":" in spec:
        return _import_policy(spec)
    try:
        return make_policy(spec)
    except ValueError as unknown:
        _load_plugins()
        for resolver in _RESOLVERS:
            policy = resolver(spec, scenario)
            if policy is not None:
                return policy
        raise unknown


def _import_policy(spec: str) -> Any:
    """``package.module:attribute``: a policy object, or a class/factory called without arguments."""
    import importlib

    module_name, _, attr = spec.partition(":")
    try:
        target = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"cannot import policy {spec!r}: {exc}") from exc
    policy = target if callable(getattr(target, "act", None)) and not isinstance(target, type) else target()
    if not callable(getattr(policy, "act", None)) or not callable(getattr(policy, "reset", None)):
        raise TypeError(f"{spec!r} did not give a policy (an object with act(observations, infos) and reset(seed))")
    return policy


def _load_plugins() -> None:
    # The dual agent registers its resolver on import; import it lazily (it needs torch).
    try:
        import dual_agent  # noqa: F401
    except ImportError:
        pass


@dataclass(frozen=True)
class Task:
    """One episode to run."""

    policy: PolicySpec
    scenario: str
    split: str
    seed: int
    env_kwargs: tuple = ()          # sorted (key, value) pairs, hashable and picklable
    record: bool = False


def run_task(task: Task) -> EpisodeResult:
    """Run one task (in whatever process the backend chose)."""
    _limit_threads()
    policy = resolve_policy(task.policy, task.scenario)
    return run_episode(policy, task.scenario, task.split, task.seed, dict(task.env_kwargs), record=task.record)


def _limit_threads() -> None:
    # Several episode workers on a small machine: one BLAS/torch thread each (DEVELOPERS.md).
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    try:
        import sys

        if "torch" in sys.modules:
            sys.modules["torch"].set_num_threads(1)
    except Exception:  # pragma: no cover - torch oddities must not stop an evaluation
        pass


def make_tasks(policies: Sequence[PolicySpec], scenarios: Sequence[str], split: str, seeds: Iterable[int],
               env_kwargs: Optional[dict] = None, record_seeds: Iterable[int] = ()) -> list[Task]:
    """The product policies x scenarios x seeds; ``record_seeds`` are run with recording on."""
    kw = tuple(sorted((env_kwargs or {}).items()))
    recorded = set(int(s) for s in record_seeds)
    return [Task(p, sc, split, int(s), kw, int(s) in recorded)
            for sc in scenarios for p in policies for s in seeds]


def run_tasks(tasks: Sequence[Task], backend: str = "auto", workers: Optional[int] = None,
              progress: bool = False, ray_address: Optional[str] = None) -> list[EpisodeResult]:
    """Run tasks; results come back in the order of ``tasks`` whatever the backend.

    Args:
        backend: ``serial``, ``process`` (a local process pool), ``ray`` (needs the ``ray`` extra;
            ``ray_address`` joins an existing cluster, otherwise a local instance starts), or
            ``auto`` (processes when there are several tasks and cores and the policies pickle).
        workers: parallel workers (default: the machine's cores, at most the number of tasks).
        progress: show a progress bar.
    """
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    tasks = list(tasks)
    if not tasks:
        return []
    workers = max(1, min(workers or os.cpu_count() or 1, len(tasks)))
    if backend == "auto":
        backend = "process" if workers > 1 and len(tasks) > 1 and _picklable(tasks) else "serial"
    elif backend in ("process", "ray") and not _picklable(tasks):
        raise ValueError(f"the {backend} backend sends policies to other processes, but a policy "
                         "does not pickle; pass its name, make it picklable, or use backend='serial'")
    bar = _progress(len(tasks), progress)
    try:
        if backend == "serial":
            results = []
            for task in tasks:
                results.append(run_task(task))
                bar.update(1)
            return results
        if backend == "process":
            return _run_processes(tasks, workers, bar)
        return _run_ray(tasks, workers, bar, ray_address)
    finally:
        bar.close()


def _picklable(tasks: Sequence[Task]) -> bool:
    try:
        pickle.dumps([t.policy for t in tasks])
        return True
    except Exception:
        return False


def _progress(total: int, enabled: bool):
    from tqdm.auto import tqdm

    return tqdm(total=total, desc="episodes", unit="ep", disable=not enabled, leave=False)


def _run_processes(tasks: Sequence[Task], workers: int, bar) -> list[EpisodeResult]:
    results: list[Optional[EpisodeResult]] = [None] * len(tasks)
    with ProcessPoolExecutor(max_workers=workers, initializer=_limit_threads) as pool:
        futures = {pool.submit(run_task, task): i for i, task in enumerate(tasks)}
        for future in as_completed(futures):
            results[futures[future]] = future.result()
            bar.update(1)
    return results  # type: ignore[return-value]


def _run_ray(tasks: Sequence[Task], workers: int, bar, address: Optional[str]) -> list[EpisodeResult]:
    try:
        import ray
    except ImportError as exc:
        raise ImportError("the ray backend needs Ray: pip install 'hetero-cluster-sched[ray]'") from exc
    started = False
    if not ray.is_initialized():
        if address:
            ray.init(address=address, log_to_driver=False)
        else:
            ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False)
        started = True
    try:
        remote = ray.remote(num_cpus=1)(run_task)
        refs = [remote.remote(task) for task in tasks]
        index = {ref: i for i, ref in enumerate(refs)}
        results: list[Optional[EpisodeResult]] = [None] * len(tasks)
        pending = list(refs)
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            for ref in done:
                results[index[ref]] = ray.get(ref)
                bar.update(1)
        return results  # type: ignore[return-value]
    finally:
        if started:
            ray.shutdown()
