"""``benchmarks/eval_dual_paired.py --optimality``: the agent's and each reference's paired ratio to
the best-known value of each window (the shipped optimality table) and the share of a reference's
gap to best-known that the agent closes."""
from __future__ import annotations

import math

import pytest

from baselines.optimality import load_table
from tests.helpers import load_script

SCENARIO = "modern-v1"


def _module():
    return load_script("benchmarks/eval_dual_paired.py")


def _record(policy: str, seed: int, avg_jct: float, window: str, env: str = "") -> dict:
    return {"policy": policy, "scenario": SCENARIO, "split": "test", "seed": seed, "window": window, "env": env,
            "truncated": False, "avg_jct": avg_jct}


def test_ratios_to_best_known_and_the_gap_closed_follow_the_table():
    mod = _module()
    table = load_table(SCENARIO)
    records = []
    for seed in range(4):
        ref = table[seed]
        records += [_record("dual", seed, 1.02 * ref.best_known, ref.window),
                    _record("las-migrate", seed, 1.08 * ref.best_known, ref.window)]
    gap = mod.gap_to_best_known(records, SCENARIO, ["las-migrate"])
    assert gap["windows"] == 4
    assert gap["ratios"]["dual"]["ratio"] == pytest.approx(1.02)
    assert gap["ratios"]["las-migrate"]["ratio"] == pytest.approx(1.08)
    assert gap["gap_closed"]["las-migrate"] == pytest.approx(0.06 / 0.08)


def test_windows_the_table_does_not_hold_are_left_out():
    mod = _module()
    ref = load_table(SCENARIO)[0]
    other = [_record("dual", 0, 100.0, "not-this-window"), _record("las-migrate", 0, 110.0, "not-this-window")]
    assert mod.gap_to_best_known(other, SCENARIO, ["las-migrate"]) == {}
    changed_world = [_record("dual", 0, 100.0, ref.window, env="load=2"),
                     _record("las-migrate", 0, 110.0, ref.window, env="load=2")]
    assert mod.gap_to_best_known(changed_world, SCENARIO, ["las-migrate"]) == {}
    worse = [_record("dual", 0, ref.best_known * 0.99, ref.window), _record("fifo", 0, ref.best_known * 0.98, ref.window)]
    assert math.isnan(mod.gap_to_best_known(worse, SCENARIO, ["fifo"])["gap_closed"]["fifo"])
