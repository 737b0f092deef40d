"""The recorded series behind utilization.png and the queue plot: one row per event, so that its
time average equals the metrics."""
from __future__ import annotations

import numpy as np
import pytest

from baselines.harness.episode import SERIES_COLUMNS, run_episode
from baselines.registry import make_policy


def time_average(series: np.ndarray, column: int) -> float:
    """The step curve's integral over its span (each row holds until the next)."""
    return float(np.sum(series[:-1, column] * np.diff(series[:, 0])))


@pytest.mark.parametrize("policy", ["fifo", "tiresias"])
def test_utilisation_curve_averages_to_the_metric(policy):
    # Several events pass inside one env.step (idle epochs are skipped), so sampling after each
    # step held stale states for long spans (philly-v0 fifo: curve 0.515 against the metric 0.286).
    result = run_episode(make_policy(policy), "philly-v0", "test", 0, {"jobs_per_episode": 150}, record=True)
    s, rec = result.series, result.record
    assert s.shape[1] == len(SERIES_COLUMNS) and np.all(np.diff(s[:, 0]) > 0)
    busy = time_average(s, 1) / (result.total_gpus * rec["makespan"])
    assert busy == pytest.approx(rec["gpu_utilization"], rel=1e-9)


def test_recording_does_not_change_the_episode():
    runs = [run_episode(make_policy("fifo"), "philly-v0", "test", 1, {"jobs_per_episode": 60}, record=flag).record
            for flag in (False, True)]
    for key in ("avg_jct", "gpu_utilization", "makespan", "steps", "return"):
        assert runs[0][key] == runs[1][key]


def test_event_log_is_off_by_default():
    import cluster_env

    env = cluster_env.parallel_env("toy-v0")
    env.reset(seed=0)
    assert env.unwrapped.sim.event_log is None
