"""Named scenarios (cluster + workload + model parameters + splits) and their registry."""
from cluster_env.scenarios.base import SPLITS, Scenario
from cluster_env.scenarios.registry import custom_scenario, get_scenario, list_scenarios, register_scenario

__all__ = ["SPLITS", "Scenario", "custom_scenario", "get_scenario", "list_scenarios", "register_scenario"]
