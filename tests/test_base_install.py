"""The base install (no ``rl`` extra: no torch, stable-baselines3 or sb3-contrib) runs everything
that needs no torch, and the torch agent's paths fail with one line naming the extra.

Each check runs in a fresh interpreter where those packages cannot be imported (a
``sys.meta_path`` blocker: the pytest process has torch loaded already), through the CLI's
``main(argv)``.
"""
from __future__ import annotations

import pytest
from helpers import BLOCK_TORCH, ROOT, run_base_install, run_python

from cluster_env.extras import RAY_HINT, RL_HINT, install_hint

PROGRAM = BLOCK_TORCH + """
import sys
from baselines.cli import main, default_policies
print("DEFAULTS", default_policies("philly-v0"))
for argv in (["run", "--scenario", "philly-hetero-v1", "--policies", "fifo,dual-priority", "--seeds", "0",
              "--out", sys.argv[1] + "/hetero", "--quiet", "--no-plots", "--backend", "serial"],
             ["run", "--scenario", "philly-v0", "--policies", "fifo,dual", "--seeds", "0",
              "--out", sys.argv[1] + "/dual", "--quiet"],
             ["train", "--scenario", "toy-v0", "--smoke", "--out", sys.argv[1] + "/train", "--quiet"]):
    print("RC", argv[0], main(argv), flush=True)
print("TORCH", "torch" in sys.modules)
"""


def test_base_install_runs_the_numpy_agent_and_names_the_extra_for_torch(tmp_path):
    out = run_python(PROGRAM.replace("sys.argv[1]", repr(str(tmp_path))))
    text = out.stdout + out.stderr
    assert out.returncode == 0, text
    lines = out.stdout.splitlines()
    defaults = next(line for line in lines if line.startswith("DEFAULTS"))
    assert "'fifo'" in defaults and "'dual'" not in defaults       # dual left out, and said so:
    assert "leave out 'dual'" in out.stderr and "pip install '.[rl]'" in out.stderr
    assert "RC run 0" in lines                                      # philly-hetero-v1 with dual-priority
    assert (tmp_path / "hetero" / "results.csv").read_text().count("dual-priority") == 1
    assert lines.count("RC run 2") == 1 and "RC train 2" in lines  # torch paths: a user error, exit 2
    errors = [line for line in out.stderr.splitlines() if line.startswith("cluster-bench") and "error:" in line]
    assert len(errors) == 2 and all("pip install '.[rl]'" in line for line in errors), out.stderr
    assert "Traceback" not in out.stderr
    assert "TORCH False" in lines


RUN_SCRIPT = "import runpy, sys\nsys.argv = sys.argv[1:]\nrunpy.run_path(sys.argv[0], run_name='__main__')\n"


@pytest.mark.parametrize("example,extra", [("03_train_maskable_ppo.py", "rl"), ("04_train_dual_agent.py", "rl"),
                                           ("08_cleanrl_ppo_parallel.py", "rl"), ("09_rllib_dual_agent.py", "rllib")])
def test_examples_that_need_an_extra_name_it_in_one_line(example, extra):
    out = run_base_install(RUN_SCRIPT, str(ROOT / "examples" / example))
    assert out.returncode == 1, out.stdout + out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and install_hint(extra) in lines[0] and example[:2] in lines[0], out.stderr
    assert "Traceback" not in out.stderr


def test_vector_envs_and_the_ray_backend_name_their_extra():
    code = """
import cluster_env.wrappers as w
import cluster_env.vector as v
from baselines import evaluate
from cluster_env.extras import MissingExtraError
for name, call in [("make_vec_env", lambda: w.make_vec_env()), ("supersuit_vec_env", lambda: w.supersuit_vec_env()),
                   ("ParallelVecEnv", lambda: w.ParallelVecEnv), ("sb3_vec_env", lambda: v.sb3_vec_env),
                   ("ray", lambda: evaluate("fifo", "toy-v0", seeds=[0], backend="ray"))]:
    try:
        call()
        print("NO ERROR", name)
    except MissingExtraError as exc:
        print("ERR", name, exc)
"""
    out = run_base_install(code)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    assert len(lines) == 5 and all(line.startswith("ERR ") for line in lines), out.stdout
    for line in lines[:4]:
        assert "needs the 'rl' extra" in line and line.endswith(RL_HINT), line
    assert "needs the 'ray' extra" in lines[4] and lines[4].endswith(RAY_HINT)


def test_scores_check_checks_what_needs_no_extra_and_lists_what_it_skipped():
    code = "import sys\nfrom baselines.cli import main\nsys.exit(main(sys.argv[1:]))\n"
    out = run_base_install(code, "scores", "--check", "--scenarios", "toy-v0,philly-v0", "--quiet")
    assert out.returncode == 0, out.stdout + out.stderr
    lines = out.stdout.splitlines()
    skip = [line for line in lines if line.startswith("skip ")]
    assert len(skip) == 1 and "philly-v0.json" in skip[0] and "'dual'" in skip[0] and RL_HINT in skip[0]
    assert any(line.startswith("ok ") and "toy-v0.json" in line for line in lines)
    assert "1 file(s)" in lines[-1] and "1 skipped" in lines[-1]


def test_hints_are_spelled_in_one_place():
    """Every hint that installs an extra, in the packages and the examples, is cluster_env.extras'
    spelling (``pip install '.[rl]'``), and only that module spells it out."""
    import re

    spelled = set()
    for folder in ("cluster_env", "baselines", "dual_agent", "examples"):
        for path in (ROOT / folder).rglob("*.py"):
            if path != ROOT / "cluster_env" / "extras.py":
                spelled |= set(re.findall(r"pip install [^\n`\"]*(?:\[|ray|torch|stable|sb3|supersuit)[^\n`\"]*",
                                          path.read_text()))
    allowed = {install_hint(e) for e in ("rl", "ray", "rllib")}
    assert "pip install '.[rl]'" in spelled                  # the pattern finds the hints
    assert all(any(text.startswith(a) for a in allowed) for text in spelled), sorted(spelled)


def test_examples_that_need_no_extra_run_on_the_base_install(tmp_path):
    """Examples 01, 02, 05, 06 and 07 (no torch) run with every extra blocked, in one interpreter."""
    code = """
import os, runpy, sys
folder, examples = sys.argv[1], sys.argv[2]
os.chdir(folder)
for argv in (["01_quickstart_random_agent.py", "--scenario", "philly-v0", "--split", "test", "--jobs-per-episode", "60"],
             ["02_compare_baselines.py", "--scenario", "philly-v0", "--policies", "fifo", "sjf", "--seeds", "0",
              "--jobs-per-episode", "60", "--out", "res"],
             ["05_custom_trace_and_cluster.py", "--policies", "fifo", "--seeds", "0"],
             ["06_render_timeline.py", "--scenario", "toy-v0", "--policy", "sjf", "--frames", "1", "--out", "tl"],
             ["07_custom_heuristic.py", "--scenario", "philly-v0", "--seeds", "0", "--jobs-per-episode", "60"]):
    sys.argv = [os.path.join(examples, argv[0]), *argv[1:]]
    try:
        runpy.run_path(sys.argv[0], run_name="__main__")
    except SystemExit as exc:
        assert not exc.code, (argv[0], exc.code)
    print("EXAMPLE OK", argv[0], flush=True)
print("TORCH", "torch" in sys.modules)
"""
    out = run_base_install(code, str(tmp_path), str(ROOT / "examples"))
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
    assert out.stdout.count("EXAMPLE OK") == 5 and "TORCH False" in out.stdout
    assert "Traceback" not in out.stderr
