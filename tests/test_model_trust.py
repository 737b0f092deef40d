"""Model files a user hands us run no code unless trusted, and every bad one is one clear line.

An SB3 zip is rebuilt from its parameters (``weights_only``) and plain JSON; a payload pickled into
its ``data`` entry never runs without ``--trust-model`` / ``trust_model=True`` (the marker file it
would create stays absent), and runs with it. Sizes are checked before decompression; windows are
bounded; NaN logits raise; tampered settings files and bare zips give one line naming the file and
the field, exit 2, no traceback.
"""
from __future__ import annotations

import base64
import json
import math
import os
import pickle
import tracemalloc
import zipfile
from pathlib import Path

import pytest

import baselines
import cluster_env
from baselines.cli import main
from baselines.model_files import MAX_DATA_BYTES, ModelFileError, open_model_zip
from baselines.model_trust import TRUST_ENV, UntrustedModelError, trusted_models
from cluster_env.core.config import MAX_PENDING_WINDOW

JOBS = 20
SCENARIO = "philly-v0"           # small observations (876,): quick to build and to score
ENV = {"jobs_per_episode": JOBS}
RUN = ["--scenario", SCENARIO, "--seeds", "0-1", "--env", f"jobs_per_episode={JOBS}", "--no-plots", "--quiet",
       "--backend", "serial"]


@pytest.fixture(scope="module")
def saved(torch, tmp_path_factory):
    """A MaskablePPO trained tiny on philly-v0's flat view and saved with save_agent."""
    from sb3_contrib import MaskablePPO

    from cluster_env.wrappers import HeteroClusterFlatEnv

    env = HeteroClusterFlatEnv(SCENARIO, jobs_per_episode=JOBS)
    model = MaskablePPO("MlpPolicy", env, n_steps=64, batch_size=64, n_epochs=1, seed=0, device="cpu")
    model.learn(128)
    return baselines.save_agent(model, tmp_path_factory.mktemp("agent") / "agent.zip", env)


# ----------------------------------------------------------------------------- helpers: doctored zips
def rewrite_zip(src: Path, dst: Path, change_data=None, extra: dict | None = None) -> Path:
    """``src`` copied to ``dst`` with its ``data`` JSON changed by ``change_data(data)`` (and a
    copy of its settings file beside it when there is one)."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        for info in zin.infolist():
            raw = zin.read(info)
            if info.filename == "data" and change_data is not None:
                data = json.loads(raw)
                change_data(data)
                raw = json.dumps(data).encode()
            zout.writestr(info.filename, raw)
        for name, raw in (extra or {}).items():
            zout.writestr(name, raw)
    side = src.with_name(src.stem + ".agent.json")
    if side.is_file():
        dst.with_name(dst.stem + ".agent.json").write_text(side.read_text())
    return dst


def touch_and_return(marker: str, value):
    """What the payload runs when unpickled: creates ``marker`` (the proof it ran), gives ``value``."""
    Path(marker).touch()
    return value


class Payload:
    """Pickles to a call of :func:`touch_and_return`: harmless, but it proves code from the file ran."""

    def __init__(self, marker: Path, value) -> None:
        self.marker, self.value = str(marker), value

    def __reduce__(self):
        return (touch_and_return, (self.marker, self.value))


def serialized(obj, type_text: str) -> dict:
    """A field as SB3 stores a non-JSON object: base64 pickle plus its type's text."""
    return {":type:": type_text, ":serialized:": base64.b64encode(pickle.dumps(obj)).decode()}


def episodes(spec, **kw) -> list[tuple]:
    records = baselines.evaluate(spec, SCENARIO, seeds=[0, 1], env_kwargs=ENV, backend="serial", **kw)
    return [(r["avg_jct"], r["steps"], r["jobs_finished"]) for r in records]


# ----------------------------------------------------------------------------- item 1: no code without trust
def test_a_saved_agent_loads_without_trust_and_scores_as_sb3s_own_load(saved, tmp_path, capsys, monkeypatch):
    from sb3_contrib import MaskablePPO

    from cluster_env.wrappers import FlatViewPolicy, HeteroClusterFlatEnv

    monkeypatch.delenv(TRUST_ENV, raising=False)
    # SB3's own load would unpickle the zip's data: a spy proves the default path never calls it.
    calls = []
    real_load = MaskablePPO.load
    monkeypatch.setattr(MaskablePPO, "load", classmethod(lambda cls, *a, **k: calls.append(a) or real_load(*a, **k)))
    policy = baselines.load_agent(saved)
    assert policy.name == "MaskablePPO(agent)" and calls == []
    view = HeteroClusterFlatEnv(SCENARIO, jobs_per_episode=JOBS)
    reference = FlatViewPolicy.from_sb3(real_load(str(saved), device="cpu"), view, name="sb3-load")
    mine = episodes(str(saved))
    assert mine == episodes(reference)                    # the rebuilt policy acts as SB3's model
    assert all(j == JOBS and math.isfinite(a) for a, _, j in mine)
    # ... and on the command line, without --trust-model, no warning.
    assert main(["run", "--policies", f"fifo,{saved}", "--out", str(tmp_path / "out"), *RUN]) == 0
    assert "trust" not in capsys.readouterr().err
    assert calls == []


def test_a_bare_sb3_save_with_a_custom_network_loads_without_trust(torch, tmp_path):
    from stable_baselines3 import PPO

    from cluster_env.wrappers import FlatViewPolicy, HeteroClusterFlatEnv

    view = HeteroClusterFlatEnv(SCENARIO, jobs_per_episode=JOBS)
    model = PPO("MlpPolicy", view, n_steps=64, batch_size=64, n_epochs=1, seed=1, device="cpu",
                policy_kwargs={"net_arch": [32, 16], "activation_fn": torch.nn.ReLU})   # stored pickled in data
    model.save(tmp_path / "bare")
    policy = baselines.load_agent(tmp_path / "bare.zip", scenario=SCENARIO)
    assert policy.name == "PPO(bare)"
    assert episodes(policy) == episodes(FlatViewPolicy.from_sb3(model, view))


def test_a_payload_in_a_field_the_loader_does_not_need_is_never_unpickled(saved, tmp_path, monkeypatch):
    monkeypatch.delenv(TRUST_ENV, raising=False)
    marker = tmp_path / "ran"

    def plant(data):
        data["lr_schedule"] = serialized(Payload(marker, 0.0003), data["lr_schedule"][":type:"])

    evil = rewrite_zip(saved, tmp_path / "evil.zip", plant)
    assert episodes(str(evil)) == episodes(str(saved))
    assert not marker.exists()


def test_a_payload_the_policy_needs_runs_only_with_the_trust_flag(saved, tmp_path, capsys, monkeypatch):
    monkeypatch.delenv(TRUST_ENV, raising=False)
    marker = tmp_path / "ran"

    def plant(data):       # policy_kwargs as a pickled custom object: only SB3's unpickling load builds it
        data["policy_kwargs"] = serialized(Payload(marker, {}), "<class 'mypackage.CustomKwargs'>")

    evil = rewrite_zip(saved, tmp_path / "evil.zip", plant)
    with pytest.raises(UntrustedModelError, match=r"evil\.zip: .*policy_kwargs.*--trust-model"):
        baselines.load_agent(evil)
    assert not marker.exists()
    out = tmp_path / "out"
    assert main(["run", "--policies", f"fifo,{evil}", "--out", str(out), *RUN]) == 2
    err = capsys.readouterr().err
    assert f"error: {evil}:" in err and "--trust-model" in err and "Traceback" not in err
    assert len([line for line in err.splitlines() if "error:" in line]) == 1
    assert not marker.exists() and not (out / "results.json").exists()

    # Trusted (keyword): SB3's own load runs the (harmless) payload, with a warning naming the risk.
    with pytest.warns(UserWarning, match="may run code"):
        policy = baselines.load_agent(evil, trust_model=True)
    assert marker.exists() and policy.name == "MaskablePPO(evil)"
    marker.unlink()
    # Trusted on the command line: the warning once, the run completes, scored as the clean file.
    assert main(["run", "--trust-model", "--policies", f"fifo,{evil}", "--out", str(out), *RUN]) == 0
    err = capsys.readouterr().err
    assert "warning: --trust-model" in err and "run code" in err and marker.exists()
    scored = [r for r in json.loads((out / "results.json").read_text())["episodes"] if r["policy"] == "MaskablePPO(evil)"]
    assert scored and [(r["avg_jct"], r["steps"]) for r in scored] == [e[:2] for e in episodes(str(saved))]
    assert TRUST_ENV not in os.environ                    # the trust ended with the command


def test_trusted_models_is_scoped_and_reaches_workers_through_the_environment(monkeypatch):
    monkeypatch.delenv(TRUST_ENV, raising=False)
    with trusted_models():
        assert os.environ[TRUST_ENV] == "1"
        with trusted_models(False):
            assert os.environ[TRUST_ENV] == "1"
    assert TRUST_ENV not in os.environ


def torch_actor(torch, vec_size: int, n_actions: int, nan: bool = False):
    class Actor(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = torch.nn.Linear(vec_size, n_actions)

        def forward(self, x):
            out = self.lin(x)
            return out * float("nan") if nan else out

    torch.manual_seed(0)
    return Actor()


def _flat_view():
    from cluster_env.wrappers import HeteroClusterFlatEnv

    return HeteroClusterFlatEnv(SCENARIO, jobs_per_episode=JOBS)


def test_a_torchscript_module_needs_the_trust_flag_also_in_worker_processes(torch, tmp_path, capsys, monkeypatch):
    monkeypatch.delenv(TRUST_ENV, raising=False)
    view = _flat_view()
    path = baselines.save_agent(torch_actor(torch, view.layout.size, view.action_space.n), tmp_path / "actor.zip",
                                view, label="actor")
    with pytest.raises(UntrustedModelError, match=r"actor\.zip: a TorchScript module.*--trust-model"):
        baselines.load_agent(path)
    assert main(["run", "--policies", f"fifo,{path}", "--out", str(tmp_path / "out"), *RUN]) == 2
    err = capsys.readouterr().err
    assert "TorchScript" in err and "--trust-model" in err and "Traceback" not in err
    # Trusted: loads here and in the process backend's workers (the trust travels in the environment).
    run = [a if a != "serial" else "process" for a in RUN]
    assert main(["run", "--trust-model", "--workers", "2", "--policies", f"fifo,{path}", "--out",
                 str(tmp_path / "out"), *run]) == 0
    records = json.loads((tmp_path / "out" / "results.json").read_text())["episodes"]
    assert [r["jobs_finished"] for r in records if r["policy"] == "actor(actor)"] == [JOBS, JOBS]


def test_a_pickled_payload_in_a_dual_agent_checkpoint_is_refused_trusted_or_not(torch, tmp_path, capsys):
    pytest.importorskip("dual_agent")
    marker = tmp_path / "ran"
    path = tmp_path / "evil.pt"
    torch.save({"format": "cluster-env/dual-agent", "version": 1, "x": Payload(marker, 1)}, path)
    for trust in ([], ["--trust-model"]):
        assert main(["run", *trust, "--policies", f"fifo,{path}", "--out", str(tmp_path / "out"), *RUN]) == 2
        err = capsys.readouterr().err
        assert f"{path}: carries pickled Python objects" in err and "Traceback" not in err
    assert not marker.exists()


# ----------------------------------------------------------------------------- item 10: NaN logits
def test_nan_logits_of_a_torchscript_module_raise_naming_the_file(torch, tmp_path):
    view = _flat_view()
    path = baselines.save_agent(torch_actor(torch, view.layout.size, view.action_space.n, nan=True),
                                tmp_path / "nan.zip", view, label="nan")
    with trusted_models(), pytest.raises(FloatingPointError, match=r"nan\.zip: non-finite logits"):
        episodes(str(path))
    # NaN weights: refused when loaded, naming the file and the weights.
    actor = torch_actor(torch, view.layout.size, view.action_space.n)
    with torch.no_grad():
        actor.lin.bias[0] = float("nan")
    path = baselines.save_agent(actor, tmp_path / "nanw.zip", view, label="nanw")
    with trusted_models(), pytest.raises(ModelFileError, match=r"nanw\.zip: non-finite weights .*lin\.bias"):
        baselines.load_agent(path)


# ----------------------------------------------------------------------------- item 4: sizes before allocation
def _bomb(path: Path, entry: str, size: int, byte: bytes = b" ") -> Path:
    """A zip whose ``entry`` inflates to ``size`` bytes of ``byte`` (written in chunks)."""
    chunk = byte * 2**20
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as z:
        z.writestr("policy.pth", b"")
        with z.open(entry, "w", force_zip64=True) as fh:
            for _ in range(size // len(chunk)):
                fh.write(chunk)
    return path


def test_a_zip_bomb_is_refused_from_its_directory_without_inflating_it(tmp_path, capsys):
    bomb = _bomb(tmp_path / "bomb.zip", "data", 2 * MAX_DATA_BYTES)
    assert bomb.stat().st_size < MAX_DATA_BYTES // 100
    tracemalloc.start()
    try:
        with pytest.raises(ModelFileError, match=r"bomb\.zip: zip entry 'data' declares 33,554,432 bytes; .* at most "
                                                 r"16,777,216 \(refused before decompressing it\)"):
            open_model_zip(bomb)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2**20                       # the entry (32 MiB) was never read
    # The case: a 1.5 GiB `data` entry (its declared size forged here, so the test writes no GiB).
    forged = tmp_path / "forged.zip"
    with zipfile.ZipFile(forged, "w") as z:
        z.writestr("data", b"{}")
    raw = bytearray(forged.read_bytes())
    central = raw.index(b"PK\x01\x02")
    raw[central + 24:central + 28] = (3 * 2**29).to_bytes(4, "little")       # uncompressed size: 1.5 GiB
    forged.write_bytes(bytes(raw))
    assert zipfile.ZipFile(forged).getinfo("data").file_size == 3 * 2**29
    assert main(["run", "--policies", f"fifo,{forged}", "--out", str(tmp_path / "out"), *RUN]) == 2
    err = capsys.readouterr().err
    assert f"error: {forged}: zip entry 'data' declares 1,610,612,736 bytes" in err and "Traceback" not in err
    ratio = _bomb(tmp_path / "ratio.zip", "weights.bin", 8 * 2**20, b"\0")
    with pytest.raises(ModelFileError, match=r"ratio\.zip: zip entry 'weights\.bin' expands .*more than 100:1"):
        open_model_zip(ratio)


def test_a_forged_network_size_is_refused_before_the_network_is_built(saved, tmp_path):
    def widen(data):
        data["policy_kwargs"] = {"net_arch": [65_536, 65_536]}      # 16 GiB of float32 weights

    forged = rewrite_zip(saved, tmp_path / "wide.zip", widen)
    # Built, the network would take 16 GiB (torch would fail to allocate, or swap): refused first.
    with pytest.raises(ModelFileError, match=r"wide\.zip: policy_kwargs net_arch \[65536, 65536\] needs "
                                             r"[\d,]+ bytes of weights but its 'policy.pth' holds"):
        baselines.load_agent(forged)


def test_window_bounds_are_checked_before_any_allocation(tmp_path, capsys, saved):
    for key in ("pending_window", "running_window"):
        tracemalloc.start()
        try:
            with pytest.raises(ValueError, match=rf"{key}=1,000,000,000 is above its bound 65,536"):
                cluster_env.parallel_env("toy-v0", **{key: 10**9, "preemption": True})
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert peak < 64 * 2**20
    cluster_env.parallel_env("toy-v0", pending_window=MAX_PENDING_WINDOW)      # the bound itself is allowed
    assert main(["run", "--scenario", "toy-v0", "--policies", "fifo", "--env", "pending_window=1000000000",
                 "--out", str(tmp_path / "out"), "--no-plots", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "pending_window=1,000,000,000 is above its bound 65,536" in err and "Traceback" not in err
    # ... and in a settings file's env_overrides, naming the file and the field.
    agent = rewrite_zip(saved, tmp_path / "wide.zip")
    side = tmp_path / "wide.agent.json"
    meta = json.loads(side.read_text())
    meta["env_overrides"]["pending_window"] = 10**9
    side.write_text(json.dumps(meta))
    with pytest.raises(ModelFileError, match=r"wide\.agent\.json: field 'env_overrides': pending_window=1,000,000,000 "
                                             r"is above its bound"):
        baselines.load_agent(agent)


TRAIN, PRIORITY = ["train", "--scenario", "toy-v0", "--smoke"], ["train-priority", "--scenario", "toy-v0", "--smoke"]


@pytest.mark.parametrize("argv, message", [
    (["run", "--workers", "100000", "--policies", "fifo"], "--workers: must be between 1 and 256"),
    ([*TRAIN, "--hidden", "1000000000"], "hidden=1,000,000,000 is above its bound 4,096"),
    ([*TRAIN, "--n-envs", "100000"], "n_envs=100,000 is above its bound 256"),
    ([*PRIORITY, "--hidden", "1000000000"], "hidden must be an integer in 0 .. 4,096"),
    ([*PRIORITY, "--workers", "100000"], "workers=100,000 is above its bound 256"),
])
def test_sizes_that_allocate_at_once_are_bounded_on_the_command_line(torch, tmp_path, capsys, argv, message):
    assert main([*argv, "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


# ----------------------------------------------------------------------------- item 13: tampered files
def _deep(n: int) -> str:
    return "[" * n + "]" * n


SIDECAR_CASES = {
    "deep": (lambda meta: None, _deep(100_000), "nested too deeply"),
    "dqn": (lambda meta: meta.update(algorithm="DQN"), None, "field 'algorithm' is 'DQN'"),
    "dunder": (lambda meta: meta.update(algorithm="__name__"), None, "field 'algorithm' is '__name__'"),
    "kind": (lambda meta: meta.update(kind="torch"), None, "field 'kind' is 'torch'"),
    "obs_size": (lambda meta: meta.update(obs_size="876"), None, "field 'obs_size' is '876' (str)"),
    "version": (lambda meta: meta.update(version=99), None, "field 'version' is 99; this package reads version 1"),
}


@pytest.mark.parametrize("case", sorted(SIDECAR_CASES))
def test_a_tampered_settings_file_is_one_line_naming_the_file_and_field(saved, tmp_path, capsys, case):
    change, text, message = SIDECAR_CASES[case]
    agent = rewrite_zip(saved, tmp_path / "agent.zip")
    side = tmp_path / "agent.agent.json"
    meta = json.loads(side.read_text())
    change(meta)
    side.write_text(text if text is not None else json.dumps(meta))
    with pytest.raises(ModelFileError, match="agent.agent.json: "):
        baselines.load_agent(agent, trust_model=True)         # no trust makes a broken file load
    assert main(["run", "--policies", f"fifo,{agent}", "--out", str(tmp_path / "out"), *RUN]) == 2
    err = capsys.readouterr().err
    assert f"error: {side}: " in err and message in err, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 2       # the error and its hint


def test_the_kind_swapped_on_a_torchscript_settings_file_is_named(torch, tmp_path):
    view = _flat_view()
    path = baselines.save_agent(torch_actor(torch, view.layout.size, view.action_space.n), tmp_path / "a.zip",
                                view, label="a")
    side = tmp_path / "a.agent.json"
    side.write_text(side.read_text().replace('"kind": "torch"', '"kind": "sb3"'))
    with pytest.raises(ModelFileError, match=r"a\.agent\.json: field 'kind' is 'sb3' but a\.zip is a TorchScript"):
        baselines.load_agent(path, trust_model=True)


@pytest.mark.parametrize("data, message", [
    ([1, 2, 3], "zip entry 'data' is a JSON list"),
    ({"policy_class": "x"}, "zip entry 'data', field 'policy_class': not an object"),
    ({"policy_class": {"__module__": "m"}, "observation_space": {"_shape": ["162"]}, "action_space": {"n": "x"}},
     "field 'action_space.n': 'x' is not a size"),
])
def test_a_bare_zip_with_foreign_data_is_one_line(tmp_path, capsys, data, message):
    path = tmp_path / "bare.zip"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("data", json.dumps(data))
    assert main(["run", "--policies", f"fifo,{path}", "--out", str(tmp_path / "out"), *RUN]) == 2
    err = capsys.readouterr().err
    assert f"error: {path}: " in err and message in err and "Traceback" not in err


def test_the_bounds_are_documented_in_the_guarantees():
    from baselines import model_files
    from baselines.trained import MAX_SIDECAR_BYTES

    text = (Path(__file__).resolve().parents[1] / "docs" / "reference.md").read_text()
    guarantees = " ".join(text[text.index("## Guarantees"):].split())
    from baselines.cli import MAX_WORKERS
    from dual_agent.paper.config import MAX_HIDDEN, MAX_N_ENVS
    from dual_agent.priority.agent import MAX_HIDDEN_UNITS
    from dual_agent.priority.es import MAX_WORKERS as ES_WORKERS

    for phrase in (f"`running_window` at most {MAX_PENDING_WINDOW:,}", f"`--workers` 1 .. {MAX_WORKERS}",
                   f"`train --hidden` (the networks' width) at most {MAX_HIDDEN:,}",
                   f"`--n-envs` at most {MAX_N_ENVS}", f"`train-priority --hidden` at most {MAX_HIDDEN_UNITS:,}",
                   f"at most {model_files.MAX_ENTRIES:,} entries",
                   f"`data` JSON at most {model_files.MAX_DATA_BYTES // 2**20} MiB",
                   f"any entry at most {model_files.MAX_ENTRY_BYTES // 2**30} GiB",
                   f"all of them at most {model_files.MAX_TOTAL_BYTES // 2**30} GiB",
                   f"over {model_files.RATIO_FLOOR_BYTES // 2**20} MiB may expand at most {model_files.MAX_RATIO}:1",
                   f"settings file is at most {MAX_SIDECAR_BYTES // 2**20} MiB",
                   f"`PPO`, `A2C` or `MaskablePPO`", "--trust-model", "trust_model=True", "weights_only"):
        assert phrase in guarantees, phrase
    assert set(model_files.SAFE_SB3_POLICIES) == {"PPO", "A2C", "MaskablePPO"} and ES_WORKERS == MAX_WORKERS


# ----------------------------------------------------------------------------- trust from the environment
ANNOUNCED = "CLUSTER_BENCH_TRUST_MODEL_ANNOUNCED"     # set once the trust's warning was printed
def _warnings(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("warning:") and "trusted" in line]


@pytest.fixture
def quiet_trust(monkeypatch):
    """No trust and no announced warning in the environment; both restored after the test."""
    monkeypatch.delenv(TRUST_ENV, raising=False)
    monkeypatch.setenv(ANNOUNCED, "")     # restored (removed) after the test, whatever the code sets
    return monkeypatch


def test_the_environment_variable_trusts_with_the_flags_warning_once(torch, tmp_path, capfd, quiet_trust):
    view = _flat_view()
    path = baselines.save_agent(torch_actor(torch, view.layout.size, view.action_space.n), tmp_path / "actor.zip",
                                view, label="actor")
    seen = {}
    for way in ("flag", "environment"):
        if way == "environment":
            quiet_trust.setenv(TRUST_ENV, "1")
        out = tmp_path / way
        trust = ["--trust-model"] if way == "flag" else []
        assert main(["run", *trust, "--policies", f"fifo,{path}", "--out", str(out), *RUN]) == 0
        lines = _warnings(capfd.readouterr().err)
        assert len(lines) == 1, lines                       # once, on stderr
        seen[way] = lines[0]
        records = json.loads((out / "results.json").read_text())["episodes"]
        assert [r["jobs_finished"] for r in records if r["policy"] == "actor(actor)"] == [JOBS, JOBS]
    assert seen["flag"].startswith("warning: --trust-model: ") and "run code" in seen["flag"]
    assert seen["environment"].startswith(f"warning: {TRUST_ENV}=1 (environment): ")
    # the same warning, naming which way trusted
    assert seen["flag"].split(": ", 2)[2] == seen["environment"].split(": ", 2)[2]


def test_the_environment_variable_warns_once_in_python_too(torch, tmp_path, capfd, quiet_trust):
    view = _flat_view()
    path = baselines.save_agent(torch_actor(torch, view.layout.size, view.action_space.n), tmp_path / "actor.zip",
                                view, label="actor")
    with pytest.raises(UntrustedModelError):
        baselines.load_agent(path)
    assert _warnings(capfd.readouterr().err) == []
    quiet_trust.setenv(TRUST_ENV, "1")
    for _ in range(2):
        assert baselines.load_agent(path).name == "actor(actor)"
    lines = _warnings(capfd.readouterr().err)
    assert len(lines) == 1 and lines[0].startswith(f"warning: {TRUST_ENV}=1 (environment): "), lines
    # Trust given in code (trusted_models) is not announced again.
    quiet_trust.setenv(ANNOUNCED, "")
    quiet_trust.delenv(TRUST_ENV)
    with trusted_models():
        baselines.load_agent(path)
    assert _warnings(capfd.readouterr().err) == []


# ----------------------------------------------------------------------------- messages about model files
class OpenPayload:
    """Pickles to ``os.open(marker, O_CREAT)``: creates the marker if it ever runs (torch blocks
    ``os``/``posix`` outright and says "unsupported GLOBAL posix.open ... is blocked")."""

    def __init__(self, marker: Path) -> None:
        self.marker = str(marker)

    def __reduce__(self):
        return (os.open, (self.marker, os.O_CREAT | os.O_WRONLY))


def _payload_files(torch, marker: Path) -> dict:
    """The payload as torch.save writes it and as a plain pickle (protocol 4, which torch cannot parse)."""
    import io

    buffer = io.BytesIO()
    torch.save({"format": "cluster-env/dual-agent", "version": 1, "x": OpenPayload(marker)}, buffer)
    return {"torch.save": buffer.getvalue(), "pickle": pickle.dumps({"x": OpenPayload(marker)}, protocol=4)}


def test_a_pickle_payload_in_a_pt_file_is_named_whatever_torchs_wording(torch, tmp_path, capsys):
    pytest.importorskip("dual_agent")
    marker = tmp_path / "ran"
    for how, raw in _payload_files(torch, marker).items():
        path = tmp_path / f"evil-{how}.pt"
        path.write_bytes(raw)
        for trust in ([], ["--trust-model"]):
            assert main(["run", *trust, "--policies", f"fifo,{path}", "--out", str(tmp_path / "out"), *RUN]) == 2
            err = capsys.readouterr().err
            assert f"error: {path}: carries pickled Python objects" in err, err
            assert "truncated or foreign" not in err and "Traceback" not in err
    assert not marker.exists()


def test_a_pickle_payload_in_policy_pth_is_named_and_never_unpickled(torch, saved, tmp_path, monkeypatch):
    monkeypatch.delenv(TRUST_ENV, raising=False)
    marker = tmp_path / "ran"
    for how, raw in _payload_files(torch, marker).items():
        evil = tmp_path / f"evil-{how.replace('.', '-')}.zip"
        with zipfile.ZipFile(saved) as zin, zipfile.ZipFile(evil, "w") as zout:
            for info in zin.infolist():
                zout.writestr(info.filename, raw if info.filename == "policy.pth" else zin.read(info))
        for trust in (None, True):           # trust never makes a policy.pth unpickle objects
            with pytest.raises(ModelFileError) as err:
                baselines.load_agent(evil, scenario=SCENARIO, trust_model=trust)
            assert f"{evil}: zip entry 'policy.pth' carries pickled Python objects" in str(err.value), err.value
    assert not marker.exists()


def test_a_foreign_error_is_quoted_by_its_decisive_sentence_never_cut_mid_word(saved, tmp_path):
    with zipfile.ZipFile(saved) as z:
        pth = z.read("policy.pth")
    broken = tmp_path / "broken.zip"
    with zipfile.ZipFile(saved) as zin, zipfile.ZipFile(broken, "w") as zout:
        for info in zin.infolist():
            zout.writestr(info.filename, pth[: len(pth) // 2] if info.filename == "policy.pth" else zin.read(info))
    with pytest.raises(ModelFileError) as err:
        baselines.load_agent(broken, scenario=SCENARIO)
    message = str(err.value)
    # torch's sentence whole, without the advice that follows it ("This is an internal miniz error ...")
    assert message.endswith("(truncated or foreign: RuntimeError: PytorchStreamReader failed reading zip archive: "
                            "failed finding central directory)"), message


def _truncations(path: Path) -> list[int]:
    """Lengths that cut an SB3 zip right after each entry (the inner zip of a .pth ends there, so a
    reader looking for the directory at the end finds the inner one) and at a few fractions."""
    with zipfile.ZipFile(path) as z:
        offsets = sorted(i.header_offset for i in z.infolist())
    size = path.stat().st_size
    return sorted(set(offsets[1:] + [size * k // 10 for k in range(1, 10)] + [size - 1]))


def test_a_truncated_sb3_zip_is_called_truncated_not_a_torchscript_module(saved, tmp_path, capsys, monkeypatch):
    monkeypatch.delenv(TRUST_ENV, raising=False)
    raw = saved.read_bytes()
    cut = tmp_path / "cut.zip"
    for n in _truncations(saved):
        cut.write_bytes(raw[:n])
        for trust in (None, True):
            with pytest.raises(ModelFileError) as err:
                baselines.load_agent(cut, scenario=SCENARIO, trust_model=trust)
            message = str(err.value)
            assert message.startswith(f"{cut}: ") and "truncated" in message, (n, message)
            assert "TorchScript module (" not in message and "--trust-model" not in message, (n, message)
    # On the command line, cut where the directory found is policy.pth's: one line, no advice to trust the file.
    with zipfile.ZipFile(saved) as z:
        after = min(i.header_offset for i in z.infolist() if i.header_offset > z.getinfo("policy.pth").header_offset)
    cut.write_bytes(raw[:after])
    assert main(["run", "--policies", f"fifo,{cut}", "--out", str(tmp_path / "out"), *RUN]) == 2
    err = capsys.readouterr().err
    assert f"error: {cut}: truncated" in err and "--trust-model" not in err and "Traceback" not in err, err
