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

A ``rule`` schedule is a registered baseline (a named baseline or ``ORDERER+PLACER`` of the
registry's orderers and placers, with its parameters, e.g. ``las-q15``); a ``priority`` schedule is
the priority-mode agent's index (LAS's key plus ``w . phi``, a residual placer, optionally
las-migrate's rule) with those parameters. A certificate is data: reading or replaying it runs no
code from it and loads no other file (no ``module:attr`` names, no model files, no plug-ins); the
scenario is a registered scenario's name, the seed is below :data:`SEED_LIMIT`, the parameters are
numbers (checked: finite, the right count), and a file is read only when it is a regular file of at
most :data:`MAX_CERTIFICATE_BYTES`.

Public names: :data:`FORMAT`, :data:`VERSION`, :data:`SEED_LIMIT`, :data:`MAX_CERTIFICATE_BYTES`,
:class:`Certificate`, :class:`CertificateError`, :class:`Replay`, :func:`load_certificate`,
:func:`save_certificate`, :func:`replay`, :func:`replay_episode`, :func:`certificate_path`,
:func:`rule_policy`, :func:`read_json_file`.
"""
from __future__ import annotations

import json
import math
import os
import stat
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
#: Seeds a certificate may name: 0 <= seed < 2**63. The generators take any integer, but the
#: results files and tables are read back with seeds as signed 64-bit integers (numpy, pandas).
SEED_LIMIT = 2 ** 63
#: Largest certificate file read, in bytes. A certificate is a window's name and at most 14
#: numbers: the shipped ones are under 1 KB. 1 MiB leaves room for any ``found_by`` note, while a
#: huge or endless file (``/dev/zero``) is refused before it is read.
MAX_CERTIFICATE_BYTES = 1 << 20


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


def replay_error(cert: Certificate, result: Replay, where: str = "certificate") -> Optional[str]:
    """None when ``result`` passes the portable check (:meth:`Replay.agrees`), else one line
    naming ``where`` (the file) and the field the replay contradicts."""
    if result.agrees(cert):
        return None
    if result.window != cert.window:
        return (f"{where}: field window {cert.window!r} is not the window that {cert.scenario} {cert.split} "
                f"seed {cert.seed} plays ({result.window})")
    return (f"{where}: field avg_jct: the schedule does not reproduce its claim {cert.avg_jct!r} (API path "
            f"{result.api!r}, compiled path {result.compiled!r}; both must give one value, the claim within a "
            "relative 1e-6)")


def certificate_path(scenario: str, seed: int) -> Path:
    """The shipped certificate of ``scenario``'s test window ``seed``."""
    return CERTIFICATES_DIR / scenario / f"{int(seed)}.json"


def read_json_file(path: "str | Path", limit: int, what: str, error: Optional[type] = None) -> Any:
    """The decoded JSON of ``path``, read only when it is a regular file of at most ``limit``
    bytes (checked on the open file, before reading: a device, a pipe or a huge file is refused,
    not read). ``error`` (default :class:`CertificateError`): the exception raised, its message
    one line naming the file; ``what``: what the file should be (for the messages)."""
    error = error or CertificateError
    path = Path(path)
    try:   # O_NONBLOCK: opening a pipe must not wait for a writer (it is refused just below)
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        raise error(f"{path}: no such file") from None
    except OSError as exc:
        raise error(f"{path}: cannot read it ({exc.strerror or exc})") from None
    with os.fdopen(fd, "rb") as fh:
        info = os.fstat(fh.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise error(f"{path}: not a regular file; a {what} is a JSON file")
        if info.st_size > limit:
            raise error(f"{path}: {info.st_size:,} bytes; a {what} has at most {limit:,}")
        try:
            data = fh.read(limit + 1)
        except OSError as exc:
            raise error(f"{path}: cannot read it ({exc.strerror or exc})") from None
    if len(data) > limit:          # it grew after the check
        raise error(f"{path}: over {limit:,} bytes; a {what} has at most {limit:,}")
    try:
        return json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise error(f"{path}: not a {what} (unreadable JSON: {' '.join(str(exc).split())})") from None


def _number(x: Any) -> bool:
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return False
    try:
        return math.isfinite(float(x))
    except OverflowError:          # an integer beyond any float: no number here
        return False


def _is_baseline(name: Any) -> bool:
    """Whether ``name`` is a registered baseline: a named one or ORDERER+PLACER of the registry's
    orderers and placers, its parameters valid (``las-q<minutes>``, ``las-migrate<x>``). Nothing
    else (``module:attr``, a model file, a plug-in's name) is."""
    from baselines.migrate import las_migrate_threshold
    from baselines.registry import canonical_name, las_quantum_minutes, policy_parts

    if not isinstance(name, str) or canonical_name(name) is None:
        return False
    orderer = policy_parts(name)[0]
    # A quantum or threshold of more digits than a float holds reads as infinity: no parameter.
    return all(v is None or math.isfinite(v) for v in (las_quantum_minutes(orderer), las_migrate_threshold(orderer)))


def rule_policy(name: str, scenario: str) -> Any:
    """The registered baseline ``name`` as a policy (nothing is imported or loaded for it: no
    ``module:attr``, no model file, no plug-in); :class:`CertificateError` for any other name."""
    from baselines.registry import resolve_name

    policy = resolve_name(name, scenario) if _is_baseline(name) else None
    if policy is None:
        raise CertificateError(f"field schedule.policy must name a registered baseline, got {name!r:.80}")
    return policy


def _check_schedule(schedule: Any, where: str) -> dict:
    if not isinstance(schedule, dict):
        raise CertificateError(f"{where}: field schedule must be an object")
    kind = schedule.get("kind")
    if kind == "rule":
        name = schedule.get("policy")
        if not _is_baseline(name):
            raise CertificateError(f"{where}: field schedule.policy must name a registered baseline (a named "
                                   f"baseline or ORDERER+PLACER; no module or file), got {name!r:.80}")
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
    from cluster_env.scenarios.registry import list_scenarios

    if doc["scenario"] not in list_scenarios():
        raise CertificateError(f"{where}: field scenario must name a registered scenario, got {doc['scenario']!r:.80}")
    seed = doc.get("seed")
    if type(seed) is not int or not 0 <= seed < SEED_LIMIT:
        raise CertificateError(f"{where}: field seed must be an integer in [0, 2**63), got {seed!r:.40}")
    value = doc.get("avg_jct")
    if not (_number(value) and value > 0):
        raise CertificateError(f"{where}: field avg_jct must be a positive finite number, got {value!r:.40}")
    found_by = doc.get("found_by", "")
    if not isinstance(found_by, str):
        raise CertificateError(f"{where}: field found_by must be a string")
    return Certificate(scenario=doc["scenario"], split=doc["split"], seed=seed, window=doc["window"],
                       avg_jct=float(value), schedule=_check_schedule(doc.get("schedule"), where), found_by=found_by)


def load_certificate(path: "str | Path") -> Certificate:
    """Read a certificate file (JSON only: nothing in it is run; a regular file of at most
    :data:`MAX_CERTIFICATE_BYTES`)."""
    return parse_certificate(read_json_file(path, MAX_CERTIFICATE_BYTES, "certificate"), str(path))


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
    """The policy object that plays the schedule: a registered baseline, or the priority agent's
    file written here from the schedule's numbers."""
    from baselines.harness.sweep import resolve_policy

    if cert.schedule["kind"] == "rule":
        return rule_policy(cert.schedule["policy"], cert.scenario)
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
        if not _is_baseline(cert.schedule["policy"]):
            raise CertificateError(f"field schedule.policy must name a registered baseline, got "
                                   f"{cert.schedule['policy']!r:.80}")
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


__all__ = ["AGENT_FORMAT", "AGENT_VERSION", "CERTIFICATES_DIR", "FORMAT", "MAX_CERTIFICATE_BYTES", "SEED_LIMIT",
           "VERSION", "Certificate", "CertificateError", "Replay", "certificate_path", "load_certificate",
           "parse_certificate", "read_json_file", "replay", "replay_error", "replay_episode", "rule_policy", "save_certificate"]
