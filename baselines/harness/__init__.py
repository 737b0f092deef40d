"""The evaluation harness: episodes, sweeps over backends, reports, plots and regression scores."""
from baselines.harness.episode import EpisodeResult, run_episode
from baselines.harness.evaluate import evaluate
from baselines.harness.sweep import Task, make_tasks, register_policy_resolver, resolve_policy, run_tasks

__all__ = ["EpisodeResult", "Task", "evaluate", "make_tasks", "register_policy_resolver", "resolve_policy",
           "run_episode", "run_tasks"]
