"""Misuse of the environment gets a clear error (type, message naming the culprit) and leaves the
environment usable: steps outside an episode, malformed action dicts, actions of the wrong type,
out-of-range and forbidden actions, bad constructor arguments, bad reset arguments."""
from __future__ import annotations

import math

import numpy as np
import pytest

import cluster_env
from cluster_env.core.instance import Cluster, Workload
from cluster_env.errors import InvalidActionError
from tests.helpers import first_allowed_actions


def toy(**kw):
    return cluster_env.parallel_env("toy-v0", split="test", **kw)


def noops(env) -> dict:
    return {a: env.action_space(a).n - 1 for a in env.possible_agents}


# ----------------------------------------------------------------------------- episode bounds
def test_step_before_reset_after_end_and_after_close():
    env = toy()
    with pytest.raises(RuntimeError, match="before reset"):
        env.step(noops(env))
    for method in (env.metrics, env.state, env.render):
        with pytest.raises(RuntimeError, match="reset"):
            method()
    obs, _ = env.reset(seed=0)
    while env.agents:
        obs, *_ = env.step(first_allowed_actions(obs))
    with pytest.raises(RuntimeError, match="after the episode ended"):
        env.step(noops(env))
    assert env.metrics()["jobs_finished"] == env.sim.num_jobs   # still readable after the end
    env.close()
    with pytest.raises(RuntimeError, match="reset"):
        env.step(noops(env))
    obs, _ = env.reset(seed=0)                                   # usable again after close
    assert env.agents == env.possible_agents


# ----------------------------------------------------------------------------- action dicts
@pytest.mark.parametrize("actions,exc,words", [
    ({"orderer": 0}, KeyError, "missing ['placer']"),
    ({"placer": 0}, KeyError, "missing ['orderer']"),
    ({}, KeyError, "missing ['orderer', 'placer']"),
    ({"orderer": 0, "placer": 4, "ghost": 1}, KeyError, "extra ['ghost']"),
    ([0, 4], TypeError, "dict of agent -> action, got list"),
    (None, TypeError, "got NoneType"),
    ((0, 4), TypeError, "got tuple"),
])
def test_malformed_action_dicts(actions, exc, words):
    env = toy()
    env.reset(seed=0)
    with pytest.raises(exc) as err:
        env.step(actions)
    assert words in str(err.value)


@pytest.mark.parametrize("bad", [
    0.0, 1.5, "0", "advance", None, True, np.bool_(False), [0], (0,),
    np.array([0]), np.array([[0]]), np.zeros(2, dtype=np.int64), np.array(0.0), np.float32(0),
    complex(0, 0),
], ids=repr)
@pytest.mark.parametrize("agent", ["orderer", "placer"])
def test_actions_of_the_wrong_type(agent, bad):
    env = toy()
    env.reset(seed=0)
    actions = {**noops(env), agent: bad}
    with pytest.raises(TypeError, match=f"{agent}'s action must be an integer"):
        env.step(actions)


@pytest.mark.parametrize("value", [-1, 9, 10**30, np.int64(-5), np.uint64(2**63)], ids=repr)
def test_out_of_range_actions_even_in_noop_mode(value):
    for mode in ("raise", "noop"):
        env = toy(invalid_action=mode)
        env.reset(seed=0)
        n = env.action_space("orderer").n
        with pytest.raises(InvalidActionError, match=rf"orderer's action -?\d+ is outside Discrete\({n}\)"):
            env.step({**noops(env), "orderer": value})


@pytest.mark.parametrize("kind", [int, np.int8, np.int32, np.int64, np.uint16, lambda a: np.array(a)],
                         ids=["int", "int8", "int32", "int64", "uint16", "0-d array"])
def test_integer_like_actions_are_accepted(kind):
    env = toy()
    obs, _ = env.reset(seed=0)
    a = first_allowed_actions(obs)
    obs, rewards, *_ = env.step({k: kind(v) for k, v in a.items()})
    assert env.phase == 1 and math.isfinite(rewards["orderer"])


# ----------------------------------------------------------------------------- forbidden actions
def _to_place_phase_with_a_full_machine(env):
    """toy test split: start a 4-GPU job on machine 0, then pick the next 4-GPU job."""
    obs, _ = env.reset(seed=0)
    noop = noops(env)
    obs, *_ = env.step({**noop, "orderer": 0})
    obs, *_ = env.step({**noop, "placer": 0})
    assert env.phase == 0 and env.sim.machines.free[0] == 0
    obs, *_ = env.step({**noop, "orderer": 0})
    assert env.phase == 1 and obs["placer"]["action_mask"][0] == 0
    return obs


def test_forbidden_actions_raise_naming_agent_phase_and_allowed_actions():
    env = toy()
    obs = _to_place_phase_with_a_full_machine(env)
    noop = noops(env)
    with pytest.raises(InvalidActionError, match=r"placer's action 0 is forbidden in the PLACE phase: "
                                                 r"the action mask forbids it \(allowed: \[1\]\)"):
        env.step({**noop, "placer": 0})
    with pytest.raises(InvalidActionError, match="orderer's action 0 is forbidden in the PLACE phase: "
                                                 "only the no-op"):
        env.step({"orderer": 0, "placer": 1})
    env.step({**noop, "placer": 1})
    # ORDER phase: a job that does not fit (8 GPUs needed, 0 free), and the placer acting.
    obs, _ = env.reset(seed=0)
    with pytest.raises(InvalidActionError, match="placer's action 0 is forbidden in the ORDER phase"):
        env.step({"orderer": 0, "placer": 0})
    mask = obs["orderer"]["action_mask"]
    forbidden = int(np.flatnonzero(mask == 0)[0])
    with pytest.raises(InvalidActionError, match=f"orderer's action {forbidden} is forbidden in the ORDER"):
        env.step({**noop, "orderer": forbidden})


def test_rejected_actions_leave_the_episode_unchanged():
    """An episode with misuse errors in between gives exactly the trajectory of one without."""
    def episode(misuse: bool):
        env = toy()
        obs, _ = env.reset(seed=3)
        log = []
        while env.agents:
            if misuse:
                for bad in ({"orderer": 0}, {**noops(env), "orderer": 1.0}, {**noops(env), "placer": -1},
                            {"orderer": env.action_space("orderer").n - 1, "placer": 0}
                            if env.phase == 0 else {"orderer": 0, "placer": env.action_space("placer").n - 1}):
                    with pytest.raises((KeyError, TypeError, InvalidActionError)):
                        env.step(bad)
            obs, rewards, terms, truncs, infos = env.step(first_allowed_actions(obs))
            log.append((rewards["orderer"], infos["orderer"]["time"], obs["orderer"]["jobs"].copy()))
        return log, env.metrics()

    a, ma = episode(False)
    b, mb = episode(True)
    assert len(a) == len(b) > 5 and ma == mb
    for (ra, ta, oa), (rb, tb, ob) in zip(a, b):
        assert ra == rb and ta == tb
        np.testing.assert_array_equal(oa, ob)


def test_noop_mode_ignores_forbidden_actions_and_flags_them():
    env = toy(invalid_action="noop")
    obs = _to_place_phase_with_a_full_machine(env)
    before = (env.sim.now, env.sim.placing, env.sim.machines.free.copy())
    obs, rewards, terms, truncs, infos = env.step({"orderer": 0, "placer": 0})
    assert infos["orderer"]["invalid_action"] is True and infos["placer"]["invalid_action"] is True
    assert rewards["orderer"] == 0.0 and env.phase == 1
    assert (env.sim.now, env.sim.placing) == before[:2]
    np.testing.assert_array_equal(env.sim.machines.free, before[2])
    obs, rewards, terms, truncs, infos = env.step({"orderer": env.action_space("orderer").n - 1, "placer": 1})
    assert "invalid_action" not in infos["placer"] and env.phase == 0


# ----------------------------------------------------------------------------- constructor
@pytest.mark.parametrize("kwargs,exc,words", [
    ({"scenario": "nope-v0"}, ValueError, "unknown scenario 'nope-v0'; known scenarios"),
    ({"scenario": 42}, TypeError, "scenario must be a scenario name"),
    ({"scenario": None}, TypeError, "scenario must be a scenario name"),
    ({"split": "dev"}, ValueError, "has no split 'dev'"),
    ({"split": None}, ValueError, "has no split None"),
    ({"fluctuations": False}, TypeError, "unknown argument(s) ['fluctuations']"),
    ({"Preemption": True}, TypeError, "valid arguments"),
    ({"preemption": "yes"}, TypeError, "preemption must be True or False"),
    ({"fluctuation": "no"}, TypeError, "fluctuation must be True or False"),
    ({"static_factors": 2}, TypeError, "static_factors must be True or False"),
    ({"clairvoyant": None}, TypeError, "clairvoyant must be True or False"),
    ({"all_effects_off": "yes"}, TypeError, "all_effects_off must be True or False"),
    ({"pending_window": 0}, ValueError, "pending_window must be >= 1"),
    ({"pending_window": 2.5}, TypeError, "pending_window must be an integer"),
    ({"pending_window": "8"}, TypeError, "pending_window must be an integer"),
    ({"pending_window": True}, TypeError, "pending_window must be an integer"),
    ({"running_window": -1}, ValueError, "running_window must be >= 0"),
    ({"running_window": 1.5}, TypeError, "running_window must be an integer"),
    ({"restart_overhead": -1.0}, ValueError, "restart_overhead must be >= 0"),
    ({"restart_overhead": float("nan")}, ValueError, "restart_overhead must be a finite number"),
    ({"restart_overhead": float("inf")}, ValueError, "restart_overhead must be a finite number"),
    ({"restart_overhead": "30"}, TypeError, "restart_overhead must be a number"),
    ({"contention_alpha": float("nan")}, ValueError, "contention_alpha must be a finite number"),
    ({"scheduling_tick": 0}, ValueError, "scheduling_tick must be > 0"),
    ({"scheduling_tick": float("nan")}, ValueError, "scheduling_tick must be a finite number"),
    ({"measurement_noise": -0.1}, ValueError, "measurement_noise must be >= 0"),
    ({"measurement_tau": float("inf")}, ValueError, "measurement_tau must be a finite number"),
    ({"quiet_fluctuation_interval": float("nan")}, ValueError, "quiet_fluctuation_interval"),
    ({"fluctuation_params": None}, TypeError, "fluctuation_params must be a FluctuationParams"),
    ({"reference_gpu": "Z9000"}, cluster_env.UnknownGPUTypeError, "unknown GPU type 'Z9000'"),
    ({"reference_gpu": None}, TypeError, "reference_gpu must be a GPU type name"),
    ({"invalid_action": "ignore"}, ValueError, "invalid_action must be one of"),
    ({"max_steps": 0}, ValueError, "max_steps must be >= 1"),
    ({"max_steps": 2.5}, TypeError, "max_steps must be an integer"),
    ({"max_time": float("nan")}, ValueError, "max_time must be a finite number"),
    ({"max_time": -5.0}, ValueError, "max_time must be > 0"),
    ({"time_scale": -1}, ValueError, "time_scale must be > 0"),
    ({"time_scale": "fast"}, TypeError, "time_scale must be a number"),
    ({"time_scale": float("inf")}, ValueError, "time_scale must be a finite number"),
    ({"jobs_per_episode": 0}, ValueError, "jobs_per_episode must be >= 1"),
    ({"jobs_per_episode": 2.5}, TypeError, "jobs_per_episode must be an integer"),
    ({"reward": "nope"}, ValueError, "unknown reward 'nope'"),
    ({"reward": 3}, TypeError, "reward must be a name or a callable"),
    ({"render_mode": "window"}, ValueError, "render_mode must be one of ['ansi', 'rgb_array', 'human']"),
    ({"workload_columns": {"duration": "runtime"}}, TypeError, "workload_columns needs workload_csv"),
    ({"cluster_columns": {"gpu_type": "model"}}, TypeError, "cluster_columns needs cluster_csv"),
], ids=lambda v: repr(v)[:40] if isinstance(v, dict) else None)
def test_bad_constructor_arguments(kwargs, exc, words):
    kwargs = {"scenario": "toy-v0", **kwargs}
    with pytest.raises(exc) as err:
        cluster_env.parallel_env(**kwargs)
    assert words in str(err.value)


def test_valid_values_of_every_checked_type_are_accepted():
    env = toy(preemption=np.bool_(True), clairvoyant=1, pending_window=np.int64(3), running_window=0,
              restart_overhead=0, scheduling_tick=np.float32(60), max_steps=np.int32(5),
              max_time=float("inf"), time_scale=2, all_effects_off=True)
    obs, _ = env.reset(seed=0)
    assert env.action_space("orderer").n == 4


def test_missing_csv_files_name_the_path(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.csv"):
        cluster_env.parallel_env("toy-v0", workload_csv=str(tmp_path / "nope.csv"))
    with pytest.raises(FileNotFoundError, match="gone.csv"):
        cluster_env.parallel_env("toy-v0", cluster_csv=tmp_path / "gone.csv")


# ----------------------------------------------------------------------------- reset
@pytest.mark.parametrize("kwargs,exc,words", [
    ({"seed": "a"}, Exception, "Seed must be a python integer"),
    ({"seed": 1.5}, Exception, "Seed must be a python integer"),
    ({"seed": -1}, Exception, "greater or equal to zero"),
    ({"seed": 0, "options": {"split": "dev"}}, ValueError, "has no split 'dev'"),
    ({"seed": 0, "options": 5}, TypeError, "reset options must be None or a dict"),
    ({"seed": 0, "options": ["split", "test"]}, TypeError, "reset options must be None or a dict"),
])
def test_bad_reset_arguments(kwargs, exc, words):
    env = toy()
    with pytest.raises(exc) as err:
        env.reset(**kwargs)
    assert words in str(err.value)
    obs, infos = env.reset(seed=0)          # still usable
    assert env.agents == env.possible_agents


def test_reset_split_option_switches_the_split():
    env = toy()
    env.reset(seed=0, options={"split": "validation"})
    assert env.sim.num_jobs == 6 and env.sim.duration.tolist() == [80, 20, 50, 10, 70, 30]


# ----------------------------------------------------------------------------- hand-built instances
def _workload(**over):
    base = dict(name="w", job_ids=("a", "b"), submit=np.array([0.0, 5.0]), duration=np.array([10.0, 20.0]),
                gpus=np.array([1, 2]), job_type=np.array([0, 1]), tenant=np.array([0, 0]))
    base.update(over)
    return Workload(**base)


@pytest.mark.parametrize("over,words", [
    ({"duration": np.array([10.0, np.nan])}, "duration of job 1 ('b') is nan"),
    ({"duration": np.array([0.0, 1.0])}, "duration of job 0 ('a') is 0.0; it must be a finite number > 0"),
    ({"submit": np.array([-1.0, 5.0])}, "submit of job 0 ('a') is -1.0"),
    ({"submit": np.array([0.0, np.inf])}, "submit of job 1 ('b') is inf"),
    ({"submit": np.array([5.0, 0.0])}, "submit times must be sorted"),
    ({"gpus": np.array([1, 0])}, "gpus of job 1 ('b') is 0"),
    ({"job_type": np.array([0, 26])}, "job_type of job 1 ('b') is 26; it must be an index into the 26"),
    ({"tenant": np.array([-1, 0])}, "tenant of job 0 ('a') is -1"),
    ({"gpus": np.array([1, 2, 3])}, "gpus must have shape (2,)"),
])
def test_hand_built_workloads_are_checked(over, words):
    with pytest.raises(ValueError) as err:
        _workload(**over)
    assert words in str(err.value)


def test_hand_built_cluster_is_checked():
    with pytest.raises(ValueError, match="machine_type must index gpu_type_names"):
        Cluster("c", ("m0",), ("V100",), np.array([1]), np.array([4]))
    with pytest.raises(ValueError, match="at least one GPU"):
        Cluster("c", ("m0",), ("V100",), np.array([0]), np.array([0]))
