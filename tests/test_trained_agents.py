"""The researcher's loop: an agent trained on the default single-agent view (plain PPO, MaskablePPO,
SuperSuit, a CleanRL-style torch module) is scored next to the baselines in one line, under the
rule for forbidden actions it trained with, and every scored episode ends.

Tiny budgets: a few hundred training steps, 20-job windows of the default scenario, two seeds.
"""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

import baselines
import cluster_env
from baselines.cli import main
from cluster_env.scenarios.registry import DEFAULT_SCENARIO
from cluster_env.wrappers import FirstAllowedPolicy, FlatViewPolicy, HeteroClusterFlatEnv

JOBS = 20
RUN = ["--seeds", "0-1", "--env", f"jobs_per_episode={JOBS}", "--no-plots", "--quiet", "--backend", "serial"]


def _finite_records(records: list, policy: str) -> list:
    mine = [r for r in records if r["policy"] == policy]
    assert len(mine) == 2
    for r in mine:
        assert r["jobs_finished"] == JOBS and not r["truncated"]
        assert math.isfinite(r["avg_jct"]) and r["avg_jct"] > 0
    return mine


@pytest.mark.parametrize("algorithm", ["PPO", "MaskablePPO"])
def test_a_model_trained_on_the_default_view_scores_in_one_line(torch, tmp_path, capsys, algorithm):
    import gymnasium
    import sb3_contrib
    import stable_baselines3

    cls = getattr(stable_baselines3, algorithm, None) or getattr(sb3_contrib, algorithm)
    env = gymnasium.make("cluster_env/HeteroClusterFlat-v1", jobs_per_episode=JOBS)     # the default scenario
    model = cls("MlpPolicy", env, n_steps=128, batch_size=64, n_epochs=1, seed=0, device="cpu")
    model.learn(256)
    # A user's first journey: the in-memory model through baselines.evaluate, the view's rule by default.
    live = baselines.evaluate(FlatViewPolicy.from_sb3(model, env), DEFAULT_SCENARIO, seeds=[0],
                              env_kwargs={"jobs_per_episode": JOBS}, backend="serial")[0]
    assert live["jobs_finished"] == JOBS and math.isfinite(live["avg_jct"]) and not live["truncated"]
    path = baselines.save_agent(model, tmp_path / "ppo_model", env)
    assert path.name == "ppo_model.zip" and (tmp_path / "ppo_model.agent.json").is_file()
    meta = json.loads((tmp_path / "ppo_model.agent.json").read_text())
    assert meta["scenario"] == DEFAULT_SCENARIO and meta["algorithm"] == algorithm
    assert meta["env_overrides"]["invalid_action"] == "fallback"

    out = tmp_path / "out"
    assert main(["run", "--policies", f"fifo,{path}", "--out", str(out), *RUN]) == 0
    name = f"{algorithm}(ppo_model)"
    assert name in capsys.readouterr().out
    records = json.loads((out / "results.json").read_text())["episodes"]
    mine = _finite_records(records, name)
    assert {r["scenario"] for r in records} == {DEFAULT_SCENARIO}
    assert mine[0]["avg_jct"] == live["avg_jct"] and mine[0]["steps"] == live["steps"]   # the file acts as the model

    score = baselines.score_agent(str(path), policies=["fifo", "las"], seeds=range(2),
                                  env_kwargs={"jobs_per_episode": JOBS}, backend="serial")
    _finite_records(score.records, name)
    row = next(r for r in score.summary if r["policy"] == name)
    # Paired with the scenario's yardstick (las-migrate on philly-v1, added); the fallback's share is counted.
    assert row["reference"] == "las-migrate" and math.isfinite(row["ratio_avg_jct"]) and row["ratio_avg_jct_n"] == 2
    assert 0.0 <= row["fallback_share"] <= 1.0 and score.reference == "las-migrate"
    assert name in str(score) and "las" in str(score)


def test_a_bare_sb3_save_is_read_from_the_zip(torch, tmp_path):
    from sb3_contrib import MaskablePPO

    env = HeteroClusterFlatEnv(jobs_per_episode=JOBS)
    model = MaskablePPO("MlpPolicy", env, n_steps=64, batch_size=64, n_epochs=1, seed=0, device="cpu")
    model.save(tmp_path / "bare")                       # SB3's own save: no settings file
    policy = baselines.load_agent(tmp_path / "bare.zip")
    assert policy.name == "MaskablePPO(bare)" and policy.env_overrides == {"invalid_action": "fallback"}
    record = baselines.evaluate(str(tmp_path / "bare.zip"), DEFAULT_SCENARIO, seeds=[0],
                                env_kwargs={"jobs_per_episode": JOBS}, backend="serial")[0]
    assert record["jobs_finished"] == JOBS
    # A bare model of another scenario is refused with both shapes.
    with pytest.raises(ValueError, match=r"\(4234,\).*philly-v0 gives \(876,\)"):
        baselines.load_agent(tmp_path / "bare.zip", scenario="philly-v0")


def test_a_model_trained_through_supersuit_is_scored(torch, tmp_path):
    pytest.importorskip("supersuit")
    from sb3_contrib import MaskablePPO

    from cluster_env.wrappers import supersuit_vec_env

    vec = supersuit_vec_env(n_envs=1, jobs_per_episode=JOBS)                 # the default scenario
    model = MaskablePPO("MlpPolicy", vec, n_steps=64, batch_size=64, n_epochs=1, seed=0, device="cpu")
    model.learn(128)
    agent = FlatViewPolicy.from_sb3(model, vec)          # was: 'ConcatVecEnv' object has no attribute 'layout'
    assert agent.layout.shapes["agent"] == (2,) and agent.scenario == DEFAULT_SCENARIO
    records = baselines.evaluate(agent, DEFAULT_SCENARIO, seeds=[0, 1], env_kwargs={"jobs_per_episode": JOBS},
                                 backend="serial")
    assert [r["jobs_finished"] for r in records] == [JOBS, JOBS]
    path = baselines.save_agent(model, tmp_path / "ss.zip", vec)
    assert json.loads((tmp_path / "ss.agent.json").read_text())["agent_ids"] is True
    out = tmp_path / "out"
    assert main(["run", "--policies", f"fifo,{path}", "--out", str(out), *RUN]) == 0
    _finite_records(json.loads((out / "results.json").read_text())["episodes"], "MaskablePPO(ss)")


def test_a_cleanrl_style_torch_module_is_scored(torch, tmp_path):
    from cluster_env.vector import ClusterVectorEnv

    vec = ClusterVectorEnv(2, DEFAULT_SCENARIO, "train", jobs_per_episode=JOBS)
    torch.manual_seed(0)
    actor = torch.nn.Sequential(torch.nn.Linear(vec.layout.size, 8), torch.nn.Tanh(), torch.nn.Linear(8, vec.n_actions))
    direct = baselines.evaluate(FlatViewPolicy.from_torch(actor, vec, name="actor"), DEFAULT_SCENARIO, seeds=[0],
                                env_kwargs={"jobs_per_episode": JOBS}, backend="serial")[0]
    path = baselines.save_agent(actor, tmp_path / "actor.zip", vec)        # TorchScript: loading it runs its program
    with baselines.trusted_models():
        loaded = baselines.evaluate(str(path), DEFAULT_SCENARIO, seeds=[0], env_kwargs={"jobs_per_episode": JOBS},
                                    backend="serial")[0]
    assert loaded["policy"] == "Sequential(actor)" and loaded["jobs_finished"] == JOBS
    assert loaded["avg_jct"] == direct["avg_jct"]          # the saved module acts as the live one


def test_without_torch_a_zip_fails_with_the_extra_named(tmp_path, monkeypatch, capsys):
    import sys

    from baselines import trained

    for module in ("torch", "stable_baselines3", "sb3_contrib"):
        monkeypatch.setitem(sys.modules, module, None)          # as in a base install: import fails
    monkeypatch.setattr(trained, "open_model_zip", lambda path: trained.ModelZip(path, "sb3", {}, "PPO"))
    (tmp_path / "m.zip").write_bytes(b"")
    with pytest.raises(ImportError, match=r"pip install '\.\[rl\]'"):
        trained.load_agent(tmp_path / "m.zip")
    assert main(["run", "--policies", f"fifo,{tmp_path / 'm.zip'}", "--out", str(tmp_path / "out"), *RUN]) == 2
    err = capsys.readouterr().err
    assert "error:" in err and "pip install '.[rl]'" in err and "Traceback" not in err


# ----------------------------------------------------------------------------- the rule for forbidden actions
def first_forbidden(obs: np.ndarray, mask: np.ndarray) -> int:
    """A forbidden action whenever there is one (a padded index included)."""
    return int(np.flatnonzero(~mask)[0]) if not mask.all() else 0


def test_fallback_is_accepted_by_the_harness_and_plays_the_lowest_allowed_action():
    view = HeteroClusterFlatEnv("philly-v0", "test", jobs_per_episode=JOBS)
    forbidden = FlatViewPolicy(first_forbidden, view.layout, view.action_space.n, name="bad")
    assert forbidden.env_overrides == {"invalid_action": "fallback"}     # the view's default rule
    kw = {"jobs_per_episode": JOBS}
    bad = baselines.evaluate(forbidden, "philly-v0", seeds=[3], env_kwargs=kw, backend="serial")[0]
    first = baselines.evaluate(FirstAllowedPolicy(), "philly-v0", seeds=[3], env_kwargs=kw, backend="serial")[0]
    assert bad["jobs_finished"] == JOBS and bad["avg_jct"] == first["avg_jct"] and bad["steps"] == first["steps"]
    # Each replaced decision is counted: nearly all of "bad"'s, none of the rule's.
    assert bad["fallback_share"] > 0.5 and bad["fallbacks"] <= bad["steps"] and first["fallbacks"] == 0
    # ...and asked for by the user, for any policy
    asked = baselines.evaluate(FirstAllowedPolicy(), "philly-v0", seeds=[3],
                               env_kwargs={**kw, "invalid_action": "fallback"}, backend="serial")[0]
    assert asked["avg_jct"] == first["avg_jct"]


def test_the_parallel_env_fallback_replaces_and_flags_a_forbidden_action():
    env = cluster_env.parallel_env("toy-v0", "test", invalid_action="fallback")
    obs, _ = env.reset(seed=0)
    mask = obs["orderer"]["action_mask"]
    bad = int(np.flatnonzero(mask == 0)[0])
    _, _, _, _, infos = env.step({"orderer": bad, "placer": len(obs["placer"]["action_mask"]) - 1})
    assert infos["orderer"].get("invalid_action") and env.phase == 1      # the lowest allowed job was picked
    ref = cluster_env.parallel_env("toy-v0", "test")
    ref.reset(seed=0)
    ref.step({"orderer": int(np.argmax(mask)), "placer": len(obs["placer"]["action_mask"]) - 1})
    assert ref.sim.placing == env.sim.placing


def test_a_padded_index_under_fallback_plays_the_lowest_allowed_action():
    from cluster_env.wrappers import flat_parallel_env

    env = flat_parallel_env("philly-v0", "test", jobs_per_episode=JOBS, invalid_action="fallback")
    twin = flat_parallel_env("philly-v0", "test", jobs_per_episode=JOBS)
    env.reset(seed=1)
    twin.reset(seed=1)
    noop = {a: env.env.action_space(a).n - 1 for a in env.possible_agents}
    padded = env.n_actions - 1                          # beyond the orderer's actions on philly-v0
    assert padded >= env.env.action_space("orderer").n
    _, _, _, _, infos = env.step({"orderer": padded, "placer": noop["placer"]})
    lowest = int(np.argmax(twin.action_masks()["orderer"]))
    twin.step({"orderer": lowest, "placer": noop["placer"]})
    assert infos["orderer"]["invalid_action"] and env.env.sim.placing == twin.env.sim.placing >= 0


class Stuck:
    """Always the same forbidden action (ignored under "noop"); refuses to go on far past the bound."""

    name = "stuck"

    def __init__(self, limit: int) -> None:
        self.calls, self.limit = 0, limit

    def reset(self, seed=None):
        self.calls = 0

    def act(self, observations, infos):
        self.calls += 1
        if self.calls > self.limit:
            raise AssertionError("the episode did not end")
        o, p = observations["orderer"], observations["placer"]
        return {"orderer": int(np.flatnonzero(o["action_mask"] == 0)[0]), "placer": len(p["action_mask"]) - 1}


def test_an_episode_always_ends_and_is_recorded_truncated():
    from cluster_env.core.config import DEFAULT_STEPS_PER_JOB

    jobs = 3
    policy = Stuck(limit=10 * DEFAULT_STEPS_PER_JOB * jobs)
    record = baselines.evaluate(policy, "philly-v0", seeds=[0], backend="serial",
                                env_kwargs={"jobs_per_episode": jobs, "invalid_action": "noop"})[0]
    assert record["truncated"] and record["steps"] == DEFAULT_STEPS_PER_JOB * jobs
    assert record["jobs_unfinished"] == jobs and record["jobs_finished"] == 0
    from baselines.harness.report import format_table

    assert "TRUNCATED 1/1" in format_table([record])


# ----------------------------------------------------------------------------- one default scenario
def test_the_views_default_to_the_benchmarks_scenario():
    import gymnasium

    from cluster_env.wrappers import flat_parallel_env

    for view_id in ("cluster_env/HeteroClusterFlat-v1", "cluster_env/HeteroClusterOrderer-v1"):
        assert gymnasium.make(view_id).unwrapped.env.scenario.name == DEFAULT_SCENARIO
    assert HeteroClusterFlatEnv().env.scenario.name == DEFAULT_SCENARIO
    assert flat_parallel_env().env.scenario.name == DEFAULT_SCENARIO


def test_a_view_policy_for_other_spaces_is_refused_before_the_first_episode(tmp_path, monkeypatch, capsys):
    (tmp_path / "myagent.py").write_text(
        "import numpy as np\n"
        "from cluster_env.wrappers import FlatViewPolicy, HeteroClusterFlatEnv\n"
        "def make():\n"
        "    view = HeteroClusterFlatEnv('philly-v0')\n"
        "    return FlatViewPolicy(lambda o, m: int(np.argmax(m)), view.layout, view.action_space.n, name='mine')\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    assert main(["run", "--policies", "fifo,myagent:make", "--out", str(tmp_path / "out"), *RUN]) == 2
    err = capsys.readouterr().err
    assert "error: policy 'mine'" in err and "(876,) and 35 actions" in err and "(4234,) and 257" in err
    assert "--scenario" in err and "Traceback" not in err
    assert not (tmp_path / "out" / "results.json").exists()
    # On the scenario it was built for, it runs.
    assert main(["run", "--scenario", "philly-v0", "--policies", "fifo,myagent:make", "--out",
                 str(tmp_path / "out"), *RUN]) == 0
