"""Checkpoints of the dual agent: one ``torch.save`` file with everything needed to rebuild it.

Contents (a dict of plain values and tensors, so it loads with ``weights_only=True``: a checkpoint
can never run code):

* ``format`` / ``version``: :data:`FORMAT`, :data:`VERSION`; anything else is refused;
* ``config``: :class:`DualAgentConfig` as a dict; ``spaces``: the spaces signature;
  ``scenario``: the scenario trained on;
* ``model``: the networks' state dict;
* ``train`` (training checkpoints): the :class:`TrainConfig`, the optimiser state, the iteration
  and timestep counters and the log so far, for ``resume``.
"""
from __future__ import annotations

import errno
import shutil
from pathlib import Path
from typing import Optional

import dual_agent._torch  # noqa: F401  (without torch: an ImportError that names the extra)
import torch

from baselines.harness.files import atomic_write
from baselines.model_files import carries_objects, torch_error
from dual_agent.shared import PRETRAINED_DIR, pretrained_scenarios
from dual_agent.paper.config import DualAgentConfig

FORMAT = "cluster-env/dual-agent"
VERSION = 1


class CheckpointError(ValueError):
    """A file that is not a usable dual-agent checkpoint; the message names the file and why."""


def save_checkpoint(path: "str | Path", model: torch.nn.Module, config: DualAgentConfig, spaces: dict,
                    scenario: Optional[str], train: Optional[dict] = None) -> Path:
    """Write a checkpoint atomically (a crash mid-write never leaves a truncated file behind)."""
    path = Path(path)
    data = {"format": FORMAT, "version": VERSION, "config": config.to_dict(), "spaces": dict(spaces),
            "scenario": scenario, "model": model.state_dict()}
    if train is not None:
        data["train"] = train
    try:
        atomic_write(path, lambda fh: torch.save(data, fh), binary=True)
    except (OSError, RuntimeError) as exc:
        # torch reports a failed write (ENOSPC, a file size limit) as "enforce fail ... unexpected pos".
        raise OSError(getattr(exc, "errno", None) or errno.ENOSPC,
                      f"{path}: could not write the checkpoint ({_disk_space(path.parent)}); is the disk full? "
                      f"The previous {path.name} is kept. Cause: {type(exc).__name__}: "
                      f"{str(exc).splitlines()[0] if str(exc) else ''}") from exc
    return path


def _disk_space(folder: Path) -> str:
    try:
        return f"{shutil.disk_usage(folder).free / 2**20:,.0f} MiB free in {folder}"
    except OSError:
        return f"free space in {folder} unknown"


def load_checkpoint(path: "str | Path", scenario: Optional[str] = None) -> dict:
    """Read and validate a checkpoint; ``scenario`` (if given) must be the one it was trained on."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"{path}: no such checkpoint file")
    try:
        data = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 - torch raises many kinds for truncated or foreign files
        if carries_objects(exc, path):
            # torch's own message suggests weights_only=False; a checkpoint never needs it.
            raise CheckpointError(f"{path}: carries pickled Python objects beyond tensors and plain values "
                                  f"(loading them would run code from the file); a dual-agent checkpoint holds "
                                  f"none, so it is refused, --trust-model or not") from None
        raise CheckpointError(f"{path}: not a readable dual-agent checkpoint (truncated or foreign file: "
                              f"{torch_error(exc)})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise CheckpointError(f"{path}: not a dual-agent checkpoint (format tag {FORMAT!r} missing)")
    if data.get("version") != VERSION:
        raise CheckpointError(f"{path}: checkpoint version {data.get('version')!r}; this dual_agent reads "
                              f"version {VERSION}")
    for key in ("config", "spaces", "model"):
        if key not in data:
            raise CheckpointError(f"{path}: checkpoint lacks its {key!r} entry")
    if not isinstance(data["model"], dict):
        raise CheckpointError(f"{path}: its 'model' entry is not a state dict")
    bad = [k for k, v in data["model"].items()
           if torch.is_tensor(v) and v.is_floating_point() and not bool(torch.isfinite(v).all())]
    if bad:
        more = f" and {len(bad) - 3} more" if len(bad) > 3 else ""
        raise CheckpointError(f"{path}: non-finite weights (NaN or inf) in {', '.join(bad[:3])}{more}: the "
                              f"training that wrote it diverged; use an earlier checkpoint")
    if scenario is not None and data.get("scenario") != scenario:
        raise CheckpointError(f"{path}: trained on scenario {data.get('scenario')!r}, not {scenario!r}")
    data["path"] = str(path)
    return data


def pretrained_path(scenario: str) -> Path:
    """The shipped checkpoint of ``scenario``; a clear error lists the scenarios that have one."""
    path = PRETRAINED_DIR / f"{scenario}.pt"
    if not path.is_file():
        raise FileNotFoundError(f"no pretrained dual agent for scenario {scenario!r}; shipped: {pretrained_scenarios()}. "
                                f"Train one with: cluster-bench train --scenario {scenario}")
    return path


def train_state(data: dict) -> dict:
    """The training state of a loaded checkpoint (``data["train"]``: what ``resume`` continues),
    each field checked for its type; a ``CheckpointError`` naming the file and the field."""
    import math

    where = data.get("path", "checkpoint")
    state = data.get("train")
    if state is None:
        raise CheckpointError(f"{where}: a policy checkpoint without training state; resume needs a run's last.pt")

    def bad(field: str, what: str, value: object) -> CheckpointError:
        shown = repr(value) if len(repr(value)) <= 60 else type(value).__name__
        return CheckpointError(f"{where}: field train{'.' + field if field else ''} must be {what}, got {shown}")

    if not isinstance(state, dict):
        raise bad("", "an object", state)
    for key in ("config", "optimizer", "iteration", "timesteps", "wall_s", "best", "log"):
        if key not in state:
            raise CheckpointError(f"{where}: field train.{key} is missing")
    for key in ("config", "optimizer"):
        if not isinstance(state[key], dict):
            raise bad(key, "an object", state[key])
    for key in ("iteration", "timesteps"):
        value = state[key]
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise bad(key, "an integer >= 0", value)
    for key, optional in (("wall_s", False), ("best", True)):
        value = state[key]
        if value is None and optional:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise bad(key, "a finite number" + (" or null" if optional else ""), value)
    log = state["log"]
    if not isinstance(log, list) or not all(isinstance(row, dict) for row in log):
        raise bad("log", "a list of rows (objects)", log)
    return state
