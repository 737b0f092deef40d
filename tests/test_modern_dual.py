"""The agent shipped as ``dual`` on modern-v1: what it was trained on, and its paired test figure."""
from __future__ import annotations

import json

import numpy as np
import pytest

from baselines.engine import run_weighted_las_episode
from baselines.harness.stats import geo_mean_ci
from dual_agent.priority import load_priority_agent
from dual_agent.shared import shipped_agent_path
from tests.helpers import ROOT

SCENARIO = "modern-v1"


def _doc() -> dict:
    return json.loads(shipped_agent_path(SCENARIO).read_text())


def test_the_shipped_agent_learned_on_the_recent_fifth_on_las_migrates_rule():
    doc = _doc()
    config = doc["training"]["config"]
    assert config["train_range"] == [0.8, 1.0] and config["validation"] == "split"
    assert config["seed"] == 1 and config["iterations"] == 300 and doc["training"]["final_iteration"] == 300
    assert "--train-range 0.8,1" in doc["training"]["command"]
    agent = load_priority_agent(shipped_agent_path(SCENARIO), scenario=SCENARIO, name="dual")
    assert agent.spec.migrate == 1.5 and agent.spec.placer == "fastest"
    assert not np.any(agent.model.placer)                     # its placement half is `fastest`


@pytest.mark.slow
def test_the_quoted_test_figure_is_what_the_agent_plays():
    """Paired with las-migrate over test windows 0-99 in the compiled engine (about 30 s)."""
    agent = load_priority_agent(shipped_agent_path(SCENARIO), scenario=SCENARIO)
    ratios = []
    for seed in range(100):
        jct = [run_weighted_las_episode(w, "fastest", SCENARIO, "test", seed, migrate=1.5).record["avg_jct"]
               for w in (agent.model.linear, np.zeros_like(agent.model.linear))]
        ratios.append(jct[0] / jct[1])
    g, lo, hi = geo_mean_ci(ratios)
    quoted = _doc()["training"]["test"]
    assert [round(g, 3), round(lo, 3), round(hi, 3)] == [quoted["ratio"], *quoted["ci"]]
    assert round(float(np.mean(np.array(ratios) < 1)), 2) == quoted["win_rate"]
    text = (ROOT / "docs" / "dual_agent.md").read_text()
    assert f"{g:.3f} [{lo:.3f}, {hi:.3f}]" in text
