"""The base install (no ``rl`` extra: no torch, stable-baselines3 or sb3-contrib) runs everything
that needs no torch, and the torch agent's paths fail with one line naming the extra.

Each check runs in a fresh interpreter where those packages cannot be imported (a
``sys.meta_path`` blocker: the pytest process has torch loaded already), through the CLI's
``main(argv)``.
"""
from __future__ import annotations

from helpers import BLOCK_TORCH, run_python

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
