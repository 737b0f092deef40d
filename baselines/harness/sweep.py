"""Many policies x scenarios x seeds, run serially, on local processes, or on a Ray cluster.

Every task is independent and fully seeded, so the backend changes the wall time, never a number.
Policies are resolved once per run (:func:`baselines.harness.resolve.resolve_once`, in
:func:`make_tasks`) and travel to workers as that resolution: a baseline name parsed once, or a
picklable object; a worker process builds a named policy once for all the episodes it plays.

Reliability: a worker process that dies (killed, out of memory) costs only the episodes it was
running: they are rerun on fresh workers (at most :data:`MAX_POOL_RESTARTS` times), finished ones
are kept. Workers die with their parent (Linux: ``PR_SET_PDEATHSIG``; elsewhere a watcher
thread) and ignore Ctrl-C, which the parent turns into :class:`RunInterrupted` carrying the
episodes that finished. An episode that raises stops the run with its own exception, which carries
the episodes that finished (:func:`episode_failure`) and the task that failed.
"""
from __future__ import annotations

import os
import pickle
import signal
import sys
import threading
import time
import warnings
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Optional, Sequence

from baselines.harness.episode import EpisodeResult, run_episode
from baselines.harness.resolve import (  # noqa: F401 (kept importable from here)
    PolicySpec, ResolvedPolicy, plugin_policy_names, register_policy_resolver, resolve_once, resolve_policy,
)
from baselines.startup import is_interrupt

BACKENDS = ("auto", "serial", "process", "ray")
#: How many times the process backend replaces its workers after one died (Ray retries a task 3 times).
MAX_POOL_RESTARTS = 3


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C during :func:`run_tasks`; ``results`` lists every task's result in order, ``None``
    for those that had not finished."""

    def __init__(self, results: list) -> None:
        super().__init__(f"interrupted after {sum(r is not None for r in results)} of {len(results)} episodes")
        self.results = results


class WorkersLost(RuntimeError):
    """Worker processes kept dying (more than :data:`MAX_POOL_RESTARTS` times); ``results`` as in
    :class:`RunInterrupted`."""

    def __init__(self, message: str, results: list) -> None:
        super().__init__(message)
        self.results = results


def _keep_finished(exc: BaseException, results: list, task: "Task") -> BaseException:
    """``exc`` (an episode's own error, kept as it is) with the run's ``results`` so far and the
    failed ``task`` attached (:func:`episode_failure`)."""
    exc.cluster_bench_results = results     # type: ignore[attr-defined]
    exc.cluster_bench_task = task           # type: ignore[attr-defined]
    return exc


def episode_failure(exc: BaseException) -> "Optional[tuple[list, Task]]":
    """For an error :func:`run_tasks` raised because one episode raised it: every task's result
    in order (``None`` for those that had not finished, the failed one included) and the task that
    failed; None for any other error."""
    results = getattr(exc, "cluster_bench_results", None)
    return None if results is None else (results, exc.cluster_bench_task)  # type: ignore[attr-defined]


def stopped_results(exc: BaseException) -> Optional[list]:
    """Every task's result (``None`` where it had not finished) when :func:`run_tasks` stopped with
    ``exc`` after episodes began: Ctrl-C (:class:`RunInterrupted`), :class:`WorkersLost`, or an
    episode's own error; None for any other error (a bad argument, before any episode)."""
    if isinstance(exc, (RunInterrupted, WorkersLost)):
        return exc.results
    failed = episode_failure(exc)
    return failed[0] if failed else None


def describe_task(task: "Task") -> str:
    """``fifo on toy-v0/test seed 3`` (the policy's label, or its name)."""
    who = task.label or (task.policy if isinstance(task.policy, str) else type(task.policy).__name__)
    return f"{who} on {task.scenario}/{task.split} seed {task.seed}"

@dataclass(frozen=True)
class Task:
    """One episode to run.

    ``resolved``: the policy as the run resolved it (:func:`make_tasks` sets it): the worker plays
    it without resolving ``policy`` again. A task without one resolves ``policy`` itself, each time.
    """

    policy: PolicySpec
    scenario: str
    split: str
    seed: int
    env_kwargs: tuple = ()          # sorted (key, value) pairs, hashable and picklable
    record: bool = False
    allow_env_mismatch: bool = False   # score a policy made for another environment anyway
    label: Optional[str] = None        # the record's ``policy`` field (baselines.harness.labels); None: its name
    resolved: Optional[ResolvedPolicy] = None


def run_task(task: Task) -> EpisodeResult:
    """Run one task (in whatever process the backend chose): in the compiled engine when it
    runs the policy (:mod:`baselines.engine`, the same record), else through the API; the
    record's ``policy`` is the task's label when it has one."""
    result = _run_task(task)
    if task.label is not None:
        result.record["policy"] = task.label
    return result


def _run_task(task: Task) -> EpisodeResult:
    _limit_threads()
    resolved = task.resolved if task.resolved is not None else resolve_once(task.policy, task.scenario)
    result = _run_compiled(task, resolved)
    if result is not None:
        return result
    policy = resolved.policy()        # in a worker process: built there once, not per episode
    result = _run_compiled_hook(policy, task)
    if result is not None:
        return result
    return run_episode(policy, task.scenario, task.split, task.seed, dict(task.env_kwargs), record=task.record,
                       allow_env_mismatch=task.allow_env_mismatch)


def _run_compiled_hook(policy: Any, task: Task) -> Optional[EpisodeResult]:
    """The episode from the policy's own ``compiled_episode(scenario, split, seed, env_kwargs,
    allow_env_mismatch)`` when it has one (a plug-in agent that the compiled engine can play,
    with the record the API would give), or None: no hook, a recorded episode,
    ``CLUSTER_BENCH_ENGINE=api``, or the hook raised :class:`baselines.engine.Unsupported`."""
    hook = getattr(policy, "compiled_episode", None)
    if hook is None or task.record:
        return None
    return _compiled_or_none(lambda: hook(task.scenario, task.split, task.seed, dict(task.env_kwargs),
                                          allow_env_mismatch=task.allow_env_mismatch))


def _run_compiled(task: Task, resolved: ResolvedPolicy) -> Optional[EpisodeResult]:
    """The task's episode from the compiled engine, or None when it must run through the API
    (a policy or setting without a compiled rule, a recorded episode, ``CLUSTER_BENCH_ENGINE=api``).
    The engine gets the parsed name and the policy object of ``resolved``: it parses and builds nothing."""
    from baselines import engine

    def run() -> EpisodeResult:
        if resolved.baseline is None:
            raise engine.no_compiled_rule(task.policy)
        engine.check_request(resolved.baseline, dict(task.env_kwargs), task.record)
        return engine.run_compiled_episode(resolved.baseline, task.scenario, task.split, task.seed,
                                           dict(task.env_kwargs), allow_env_mismatch=task.allow_env_mismatch,
                                           built=resolved.policy())

    return _compiled_or_none(run)


def _compiled_or_none(run: Callable[[], EpisodeResult]) -> Optional[EpisodeResult]:
    """``run()`` (an episode in the compiled engine), or None where the API must play instead:
    ``CLUSTER_BENCH_ENGINE=api``, or ``run`` raised :class:`baselines.engine.Unsupported` (raised
    on under ``CLUSTER_BENCH_ENGINE=compiled``)."""
    from baselines import engine

    mode = engine.engine_mode()
    if mode == "api":
        return None
    try:
        return run()
    except engine.Unsupported:
        if mode == "compiled":
            raise
        return None


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
               env_kwargs: Optional[dict] = None, record_seeds: Iterable[int] = (),
               allow_env_mismatch: bool = False, labels: Optional[Sequence[str]] = None,
               resolved: Optional[Sequence[ResolvedPolicy]] = None) -> list[Task]:
    """The product policies x scenarios x seeds; ``record_seeds`` are run with recording on.

    Every policy is resolved once per scenario here (:func:`resolve_once`), and its tasks carry
    that resolution to the workers. ``resolved``: the policies already resolved for the one
    scenario of ``scenarios`` (a run that checked them passes them on). ``labels``: each policy's
    row label (default :func:`baselines.harness.labels.policy_labels` of the resolved names,
    which raises ``DuplicatePolicyError`` for a policy given twice).
    """
    from baselines.harness.labels import policy_labels

    policies, scenarios = list(policies), list(scenarios)
    if resolved is not None and (len(scenarios) != 1 or len(resolved) != len(policies)
                                 or any(r.scenario != scenarios[0] for r in resolved)):
        raise ValueError(f"resolved must hold the {len(policies)} policies resolved for the one scenario of the tasks")
    by_scenario = {sc: list(resolved) if resolved is not None else [resolve_once(p, sc) for p in policies]
                   for sc in scenarios}
    if labels is None:
        first = by_scenario[scenarios[0]] if scenarios else [resolve_once(p) for p in policies]
        labels = policy_labels(policies, scenarios[0] if scenarios else None, [r.name for r in first],
                               [r.baseline for r in first])
    if len(labels) != len(policies):
        raise ValueError(f"labels must name each of the {len(policies)} policies, got {len(labels)}")
    kw = tuple(sorted((env_kwargs or {}).items()))
    recorded = set(int(s) for s in record_seeds)
    return [Task(p, sc, split, int(s), kw, int(s) in recorded, bool(allow_env_mismatch), label, r)
            for sc in scenarios for p, r, label in zip(policies, by_scenario[sc], labels) for s in seeds]


def check_distinct(tasks: Sequence[Task]) -> None:
    """Refuse, before any episode runs, two tasks that would give two records of one policy on one
    window (the same label, or spec, on the same scenario, split, seed and settings)."""
    seen: dict = {}
    for task in tasks:
        who = task.label if task.label is not None else (
            task.policy.strip().lower() if isinstance(task.policy, str) else id(task.policy))
        key = (who, task.scenario, task.split, task.seed, repr(task.env_kwargs))
        if key in seen:
            shown = task.label or (task.policy if isinstance(task.policy, str) else repr(task.policy))
            raise ValueError(f"policy {shown!r} is asked twice for window {task.scenario}/{task.split} seed "
                             f"{task.seed}: each policy may appear once in a run")
        seen[key] = task


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
    check_distinct(tasks)
    workers = max(1, min(workers or os.cpu_count() or 1, len(tasks)))
    if backend == "auto":
        backend = "process" if workers > 1 and len(tasks) > 1 and _picklable(tasks) else "serial"
    elif backend in ("process", "ray") and not _picklable(tasks):
        raise ValueError(f"the {backend} backend sends policies to other processes, but a policy "
                         "does not pickle; pass its name, make it picklable, or use backend='serial'")
    _warm_up(tasks)       # a fresh install compiles here, announced, before the bar starts its clock
    bar = _progress(len(tasks), progress)
    results: list[Optional[EpisodeResult]] = [None] * len(tasks)   # filled as episodes finish
    try:
        if backend == "serial":
            for i, task in enumerate(tasks):
                try:
                    results[i] = run_task(task)
                except Exception as exc:
                    if is_interrupt(exc):       # Ctrl-C inside a compiled function: not the episode's error
                        raise RunInterrupted(results) from None
                    raise _keep_finished(exc, results, task)
                bar.update(1)
        elif backend == "process":
            _run_processes(tasks, workers, bar, results)
        else:
            _run_ray(tasks, workers, bar, ray_address, results)
    except KeyboardInterrupt as exc:
        if isinstance(exc, RunInterrupted):
            raise
        raise RunInterrupted(results) from None
    finally:
        try:
            bar.close()
        except KeyboardInterrupt:       # after the last episode too: the caller keeps what finished
            raise RunInterrupted(results) from None
    return results  # type: ignore[return-value]


def cost_class(task: Task) -> int:
    """A coarse rank of a task's expected run time, longest first: 0 a policy that no baseline name
    covers (a learned policy such as the dual agent, a plugin, a policy object: through the API,
    often with a network per decision), 1 a named baseline that runs through the API, 2 a compiled
    engine episode (tens of times faster than the API)."""
    from baselines import engine
    from baselines.registry import resolve_name

    if not isinstance(task.policy, str):
        return 0
    if task.resolved is not None and task.resolved.baseline is None:
        return 0
    rule = task.resolved.baseline if task.resolved is not None else task.policy
    if engine.engine_mode() != "api":
        try:
            engine.check_request(rule, dict(task.env_kwargs), task.record)
            return 2
        except engine.Unsupported:
            pass
    if task.resolved is not None:
        return 1
    try:
        return 1 if resolve_name(task.policy) is not None else 0
    except ValueError:
        return 0


def longest_first(tasks: Sequence[Task], indices: Sequence[int]) -> list[int]:
    """``indices`` of ``tasks`` in the order to hand them to parallel workers: expected longest
    first (:func:`cost_class`; ties keep their order), so that the workers finish together instead
    of one running a long episode alone at the end."""
    by_kind: dict = {}           # one rank per (policy, settings): every seed and scenario shares it
    rank = {}
    for i in indices:
        task = tasks[i]
        kind = (task.policy if isinstance(task.policy, str) else id(task.policy), task.env_kwargs, task.record)
        if kind not in by_kind:
            by_kind[kind] = cost_class(task)
        rank[i] = by_kind[kind]
    return sorted(indices, key=rank.__getitem__)


def _warm_up(tasks: Sequence[Task]) -> None:
    """On a fresh install, compile the simulator's kernels and the compiled engine here once (into
    numba's disk cache; the kernels print a one-line note when they compile) rather than in every
    worker at the same time, and before the progress bar starts: its rate and ETA then count
    episodes only. Only what the tasks use: the engine for its episodes, then the environment's
    kernels if a task runs through the API (the engine's warm-up compiles some of them): all of
    them, or, when every such task is recorded (``cluster-bench run`` with its plots), those that
    recorded episodes use (not the compiled skip-idle loop, about 5 s of compile). With a warm
    cache this checks the cache's index files and returns."""
    from baselines import engine
    from cluster_env.core import kernels

    if engine.engine_mode() != "api" and any(engine.policy_codes(_rule(t)) for t in tasks if not t.record):
        engine.warm_up()
    cold, fused_cold = kernels.cache_is_cold(), kernels.kernel_is_cold("idle_events")
    if not (cold or fused_cold):
        return
    api = [t for t in tasks if cost_class(t) < 2]
    if any(not t.record for t in api):
        kernels.warm_up()
    elif api and cold:
        kernels.warm_up(recorded=True)


def _rule(task: Task) -> Any:
    """What the compiled engine would be asked to run: the resolved baseline name (None for another
    policy), or for a task without a resolution its spec."""
    return task.resolved.baseline if task.resolved is not None else task.policy


def _picklable(tasks: Sequence[Task]) -> bool:
    try:
        pickle.dumps([t.policy for t in tasks])
        return True
    except Exception:
        return False


def _progress(total: int, enabled: bool):
    from tqdm.auto import tqdm

    return tqdm(total=total, desc="episodes", unit="ep", disable=not enabled, leave=False)


def _run_processes(tasks: Sequence[Task], workers: int, bar, results: list) -> None:
    """Fill ``results`` on a local process pool; a pool whose worker died is replaced and only
    the unfinished tasks are submitted again."""
    restarts = 0
    while True:
        todo = [i for i, r in enumerate(results) if r is None]
        if not todo:
            return
        todo = longest_first(tasks, todo)
        pool = ProcessPoolExecutor(max_workers=min(workers, len(todo)), initializer=_worker_init,
                                   initargs=(os.getpid(),))
        futures: dict = {}
        try:
            futures = {pool.submit(run_task, tasks[i]): i for i in todo}
            broken = False
            for future in as_completed(futures):
                try:
                    results[futures[future]] = future.result()
                except BrokenProcessPool:
                    broken = True
                    break
                except Exception as exc:        # the episode's own error: stop, keep what finished
                    raise _keep_finished(exc, results, tasks[futures[future]])
                bar.update(1)
        except BaseException:   # Ctrl-C or an episode's own error: stop the workers now
            _stop(pool, futures, results)
            raise
        if not broken:
            pool.shutdown(wait=True)
            continue
        _stop(pool, futures, results)
        restarts += 1
        left = sum(r is None for r in results)
        if restarts > MAX_POOL_RESTARTS:
            raise WorkersLost(f"episode worker processes died {restarts} times; {left} of {len(results)} "
                              f"episodes did not finish", results)
        warnings.warn(f"an episode worker process died; rerunning its {left} unfinished episode(s) on new "
                      f"workers (restart {restarts} of at most {MAX_POOL_RESTARTS})", RuntimeWarning, stacklevel=3)


def _stop(pool: ProcessPoolExecutor, futures: dict, results: list) -> None:
    """Keep what finished, then end the pool without waiting for running episodes."""
    for future, i in futures.items():
        if results[i] is None and future.done() and not future.cancelled() and future.exception() is None:
            results[i] = future.result()
    processes = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for p in processes:
        try:
            p.kill()
        except Exception:  # noqa: BLE001 - already gone
            pass
    for p in processes:
        p.join(timeout=5)


def _worker_init(parent_pid: int) -> None:
    """Episode worker setup: one thread, Ctrl-C left to the parent, die with the parent."""
    _limit_threads()
    # Ctrl-C reaches the whole process group; the parent stops the workers and keeps what finished.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _die_with_parent(parent_pid)


def _die_with_parent(parent_pid: int) -> None:
    """End this process when ``parent_pid`` dies (a killed ``cluster-bench run`` left its workers
    running for minutes): the kernel's parent-death signal on Linux, else a watcher thread."""
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            pr_set_pdeathsig = 1
            libc = ctypes.CDLL(None, use_errno=True)
            if libc.prctl(pr_set_pdeathsig, int(signal.SIGKILL), 0, 0, 0) == 0:
                if os.getppid() != parent_pid:      # the parent died before the call
                    os._exit(1)
                return
        except (OSError, AttributeError):
            pass
    threading.Thread(target=_watch_parent, args=(parent_pid,), name="parent-watch", daemon=True).start()


def _watch_parent(parent_pid: int, period: float = 1.0) -> None:
    while os.getppid() == parent_pid:
        time.sleep(period)
    os._exit(1)


def _run_ray(tasks: Sequence[Task], workers: int, bar, address: Optional[str], results: list) -> None:
    try:
        import ray
    except ImportError as exc:
        from cluster_env.extras import missing_extra

        raise missing_extra("ray", "the ray backend", exc) from exc
    started = False
    if not ray.is_initialized():
        if address:
            ray.init(address=address, log_to_driver=False)
        else:
            ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False)
        started = True
    try:
        remote = ray.remote(num_cpus=1)(run_task)
        index = {remote.remote(tasks[i]): i for i in longest_first(tasks, range(len(tasks)))}
        refs = list(index)
        pending = list(refs)
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            for ref in done:
                try:
                    results[index[ref]] = ray.get(ref)
                except Exception as exc:
                    raise _keep_finished(exc, results, tasks[index[ref]])
                bar.update(1)
    finally:
        if started:
            ray.shutdown()
