"""`dual` is the one name of a scenario's shipped agent, whichever family it is."""
from __future__ import annotations

import json

import pytest

import dual_agent.shared as shared
from dual_agent.plugin import DUAL, DUAL_PRIORITY


def test_dual_names_the_shipped_agent_of_either_family():
    assert shared.shipped_agent_path("philly-hetero-v1").name == "philly-hetero-v1.priority.json"
    assert shared.shipped_agent_path("philly-v0").name == "philly-v0.pt"
    assert shared.shipped_agent_path("philly-v1") is None
    assert shared.shipped_agent_path("modern-v1").name == "modern-v1.priority.json"
    assert {"philly-hetero-v1", "philly-hetero-v2", "modern-v1", "philly-v0", "openb-v0"} <= set(shared.shipped_scenarios())
    assert DUAL.default_for("philly-hetero-v1") and not DUAL.default_for("philly-v1")
    assert not DUAL_PRIORITY.default_for("philly-hetero-v1")        # the alias is not listed twice
    agent = DUAL.make("philly-hetero-v1")                           # numpy: no torch needed
    assert agent.name == "dual" and type(agent).__name__ == "PriorityAgentPolicy"


def test_dual_refuses_a_scenario_with_two_shipped_agents_or_none(tmp_path, monkeypatch):
    monkeypatch.setattr(shared, "PRETRAINED_DIR", tmp_path)
    with pytest.raises(FileNotFoundError, match="no dual agent ships for scenario 'philly-v1'"):
        DUAL.make("philly-v1")
    (tmp_path / "philly-v1.pt").write_bytes(b"")
    (tmp_path / "philly-v1.priority.json").write_text(json.dumps({}))
    with pytest.raises(ValueError, match="two agents ship for scenario 'philly-v1'"):
        DUAL.make("philly-v1")
    assert shared.shipped_scenarios() == ["philly-v1"]


def test_the_checked_in_scores_key_the_shipped_agent_as_dual():
    from baselines.harness.scores import load_scores, packaged_scores_file

    for scenario in ("philly-hetero-v1", "philly-hetero-v2", "modern-v1", "philly-v0", "openb-v0"):
        policies = load_scores(packaged_scores_file(scenario))["scores"][scenario]
        assert "dual" in policies and "dual-priority" not in policies, scenario
