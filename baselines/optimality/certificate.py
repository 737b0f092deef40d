"""Best-known schedules as checkable certificates: a small JSON file that names the window and the
schedule, replayed through the environment (API path) and the compiled engine, both of which must
give the claimed average JCT to the last bit.

File (``format`` :data:`FORMAT`, ``version`` :data:`VERSION`)::

    {"format": "hetero-cluster-sched/schedule-certificate", "version": 1,
     "scenario": "philly-v1", "split": "test", "seed": 3, "window": "<workload digest>",
     "avg_jct": 8219.764810265415,
     "schedule": {"kind": "rule", "policy": "las-migrate"}
              or {"kind": "priority", "placer": "fastest", "migrate": 1.5 or null,
                  "weights": [9 numbers], "placer_weights": [5 numbers]},
     "found_by": "what made it (search and budget, or a user's)"}

A ``rule`` schedule is a named baseline; a ``priority`` schedule is the priority-mode agent's
index (LAS's key plus ``w . phi``, a residual placer, optionally las-migrate's rule) with those
parameters. Reading a certificate runs no code from it: a rule is looked up among the registered
baseline names only, and the parameters are numbers (checked: finite, the right count).

Public names: :data:`FORMAT`, :data:`VERSION`, :class:`Certificate`, :class:`CertificateError`,
:class:`Replay`, :func:`load_certificate`, :func:`save_certificate`, :func:`replay`,
:func:`replay_episode`, :func:`certificate_path`.
"""
from __future__ import annotations

import json
import math
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import numpy as np

from baselines.learned_key import PLACER_FEATURES, PRIORITY_FEATURES

FORMAT = "hetero-cluster-sched/schedule-certificate"
VERSION = 1
#: The priority agent file a ``priority`` schedule becomes for the API replay (read by the
#: ``*.priority.json`` resolver that the agent's package registers; tested against its loader).
AGENT_FORMAT, AGENT_VERSION, AGENT_SUFFIX = "hetero-cluster-sched/priority-agent", 1, ".priority.json"
#: Where the shipped certificates live: ``certificates/<scenario>/<seed>.json``.
CERTIFICATES_DIR = Path(__file__).resolve().parent / "certificates"


class CertificateError(ValueError):
    """A certificate file that cannot be read or does not hold a valid schedule; names the field."""


@dataclass(frozen=True)
class Certificate:
    """One window's schedule and its claimed average JCT."""
    scenario: str
    split: str
    seed: int
    window: str
    avg_jct: float
    schedule: dict
    found_by: str = ""

    def to_json(self) -> dict:
        return {"format": FORMAT, "version": VERSION, "scenario": self.scenario, "split": self.split,
                "seed": self.seed, "window": self.window, "avg_jct": self.avg_jct, "schedule": self.schedule,
                "found_by": self.found_by}


@dataclass(frozen=True)
class Replay:
    """What a replay gave on each path."""
    api: float
    compiled: float
    window: str

    def matches(self, cert: Certificate) -> bool:
        """Both paths give the claimed value to the last bit, on the certificate's window."""
        return self.window == cert.window and self.api == cert.avg_jct and self.compiled == cert.avg_jct

    def agrees(self, cert: Certificate) -> bool:
        """The portable check: on the certificate's window both paths give the same value to the
        last bit, and it is the claim within the scores files' relative tolerance
        (``baselines.harness.scores.DEFAULT_REL_TOL``). A CPU whose math library rounds ``exp`` or
        ``log`` differently in the last bit (numpy dispatches them by instruction set) replays a
        certificate made elsewhere to this, not to the claim's bits."""
        from baselines.harness.scores import DEFAULT_REL_TOL

        paths = [v for v in (self.api, self.compiled) if not math.isnan(v)]
        return (self.window == cert.window and bool(paths) and len(set(paths)) == 1
                and abs(paths[0] - cert.avg_jct) <= DEFAULT_REL_TOL * abs(cert.avg_jct))


def certificate_path(scenario: str, seed: int) -> Path:
    """The shipped certificate of ``scenario``'s test window ``seed``."""
    return CERTIFICATES_DIR / scenario / f"{int(seed)}.json"


def _number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _check_schedule(schedule: Any, where: str) -> dict:
    from baselines.registry import policy_parts

    if not isinstance(schedule, dict):
        raise CertificateError(f"{where}: field schedule must be an object")
    kind = schedule.get("kind")
    if kind == "rule":
        name = schedule.get("policy")
        if not isinstance(name, str) or policy_parts(name) is None:
            raise CertificateError(f"{where}: field schedule.policy must name a baseline (ORDERER+PLACER or a "
                                   f"named baseline), got {name!r}")
        return {"kind": "rule", "policy": name}
    if kind == "priority":
        from baselines.registry import PLACERS

        placer = schedule.get("placer")
        if placer not in PLACERS:
            raise CertificateError(f"{where}: field schedule.placer must be one of {sorted(PLACERS)}, got {placer!r}")
        migrate = schedule.get("migrate")
        if migrate is not None and not (_number(migrate) and migrate > 1):
            raise CertificateError(f"{where}: field schedule.migrate must be null or a number > 1, got {migrate!r}")
        out = {"kind": "priority", "placer": placer, "migrate": migrate}
        for key, size in (("weights", len(PRIORITY_FEATURES)), ("placer_weights", len(PLACER_FEATURES))):
            value = schedule.get(key)
            if not (isinstance(value, list) and len(value) == size and all(_number(v) and abs(v) <= 1e6 for v in value)):
                raise CertificateError(f"{where}: field schedule.{key} must be {size} finite numbers within +-1e6")
            out[key] = [float(v) for v in value]
        return out
    raise CertificateError(f"{where}: field schedule.kind must be 'rule' or 'priority', got {kind!r}")


def parse_certificate(doc: Any, where: str = "certificate") -> Certificate:
    """A :class:`Certificate` from a decoded JSON document; :class:`CertificateError` naming the field."""
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise CertificateError(f"{where}: field format is not {FORMAT!r}")
    if type(doc.get("version")) is not int or doc["version"] != VERSION:
        raise CertificateError(f"{where}: field version must be {VERSION}, got {doc.get('version')!r}")
    for key in ("scenario", "split", "window"):
        if not isinstance(doc.get(key), str) or not doc[key]:
            raise CertificateError(f"{where}: field {key} must be a non-empty string")
    seed = doc.get("seed")
    if type(seed) is not int or seed < 0:
        raise CertificateError(f"{where}: field seed must be an integer >= 0, got {seed!r}")
    value = doc.get("avg_jct")
    if not (_number(value) and value > 0):
        raise CertificateError(f"{where}: field avg_jct must be a positive number, got {value!r}")
    found_by = doc.get("found_by", "")
    if not isinstance(found_by, str):
        raise CertificateError(f"{where}: field found_by must be a string")
    return Certificate(scenario=doc["scenario"], split=doc["split"], seed=seed, window=doc["window"],
                       avg_jct=float(value), schedule=_check_schedule(doc.get("schedule"), where), found_by=found_by)


def load_certificate(path: "str | Path") -> Certificate:
    """Read a certificate file (JSON only: nothing in it is run)."""
    path = Path(path)
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        raise CertificateError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise CertificateError(f"{path}: not a certificate (unreadable JSON: {exc})") from None
    return parse_certificate(doc, str(path))


def save_certificate(cert: Certificate, path: "str | Path") -> Path:
    """Write ``cert`` (atomically); floats are written so that they read back to the same bits."""
    from baselines.harness.files import atomic_write

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, lambda f: f.write(json.dumps(cert.to_json()) + "\n"))
    return path


def _agent_document(cert: Certificate) -> dict:
    """The priority agent file of a ``priority`` schedule (a linear index: no hidden layer)."""
    s = cert.schedule
    doc = {"format": AGENT_FORMAT, "version": AGENT_VERSION, "features": list(PRIORITY_FEATURES),
           "placer_features": list(PLACER_FEATURES), "scenario": cert.scenario, "placer": s["placer"],
           "preempt_at": "tick", "training": {"certificate": cert.found_by},
           "weights": {"linear": s["weights"], "hidden_w": [], "hidden_b": [], "out": [],
                       "placer": s["placer_weights"]}}
    if s["migrate"] is not None:
        doc["migrate"] = s["migrate"]
    return doc


def _policy(cert: Certificate, folder: Path) -> Any:
    """The policy object that plays the schedule (through the registered resolvers: a baseline name,
    or the priority agent's file)."""
    from baselines.harness.sweep import resolve_policy

    if cert.schedule["kind"] == "rule":
        return resolve_policy(cert.schedule["policy"], cert.scenario)
    path = folder / f"certificate{AGENT_SUFFIX}"
    path.write_text(json.dumps(_agent_document(cert)))
    policy = resolve_policy(str(path), cert.scenario)
    if policy is None or not callable(getattr(policy, "compiled_episode", None)):
        raise CertificateError("a priority schedule needs the priority agent's package (dual_agent) installed")
    return policy


def _play(cert: Certificate, policy: Any, path: str) -> Any:
    """One episode of the certificate's schedule (``policy``: :func:`_policy`'s) on ``path``."""
    from baselines import engine
    from baselines.harness.episode import run_episode

    if path == "api":
        return run_episode(policy, cert.scenario, cert.split, cert.seed)
    if cert.schedule["kind"] == "rule":
        return engine.run_compiled_episode(cert.schedule["policy"], cert.scenario, cert.split, cert.seed)
    return policy.compiled_episode(cert.scenario, cert.split, cert.seed)


def replay_episode(cert: Certificate, path: str = "compiled") -> Any:
    """The certificate's schedule played on its window through ``path`` (``"compiled"`` or
    ``"api"``): the whole :class:`~baselines.harness.episode.EpisodeResult`, its record and its
    per-job outcomes (``jobs``), e.g. to pair a policy's jobs with the best-known schedule's
    (``benchmarks/gap_anatomy.py``). :class:`CertificateError` when the certificate's scenario and
    seed no longer play its window."""
    from baselines.optimality.bound import window_simulator

    if path not in ("api", "compiled"):
        raise ValueError(f"path must be 'api' or 'compiled', got {path!r}")
    played = window_simulator(cert.scenario, cert.split, cert.seed)[1].digest()
    if played != cert.window:
        raise CertificateError(f"the certificate is for window {cert.window}, but {cert.scenario} "
                               f"{cert.split} seed {cert.seed} plays window {played}")
    with tempfile.TemporaryDirectory() as tmp:
        return _play(cert, _policy(cert, Path(tmp)), path)


def replay(cert: Certificate, paths: tuple[str, ...] = ("api", "compiled")) -> Replay:
    """Play the certificate's schedule on its window through the API (PettingZoo steps) and the
    compiled engine; ``paths`` limits which (a path left out reads as nan). A certificate whose
    window is not the one its scenario and seed play is not played (both read as nan)."""
    from baselines.optimality.bound import window_simulator

    values, window = {"api": math.nan, "compiled": math.nan}, ""
    played = window_simulator(cert.scenario, cert.split, cert.seed)[1].digest()
    if played != cert.window:          # another window: nothing to play
        return Replay(api=math.nan, compiled=math.nan, window=played)
    with tempfile.TemporaryDirectory() as tmp:
        policy = _policy(cert, Path(tmp))
        for path in ("api", "compiled"):
            if path not in paths:
                continue
            record = _play(cert, policy, path).record
            values[path] = float(record["avg_jct"])
            if window and window != record["window"]:
                window = "(the two paths played different windows)"
            window = window or record["window"]
    return Replay(api=values["api"], compiled=values["compiled"], window=window)


__all__ = ["AGENT_FORMAT", "AGENT_VERSION", "CERTIFICATES_DIR", "FORMAT", "VERSION", "Certificate",
           "CertificateError", "Replay", "certificate_path", "load_certificate", "parse_certificate", "replay",
           "replay_episode", "save_certificate"]
