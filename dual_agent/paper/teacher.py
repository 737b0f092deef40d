"""Hindsight teachers: the best-known schedule of each training window, as a decision rule that
labels the states the student reaches.

The hindsight search (:func:`baselines.optimality.search.search_window`) sees a realized window
(true durations, the world draw) and returns the schedule with the lowest average JCT it found:
a named rule, or the priority index's parameters (LAS's key plus ``w . phi`` over observable
features, a residual placer, optionally ``las-migrate``'s move rule) tuned for that window. Either
is a policy over the observation, so it can answer "what would you do here" in any state, also
in the states a student reached by its own mistakes: that is what DAgger needs
(:mod:`dual_agent.paper.dagger`).

* :func:`teacher_schedules` runs the search on training windows only (split ``"train"``: a test
  window never teaches), within a budget of compiled episodes per window, and caches the results
  in one JSON file (a list of schedule certificates, :mod:`baselines.optimality.certificate`, read
  without running anything from it). The rules that read durations (the clairvoyant references
  and SJF, :data:`DURATION_RULES`) are left out of the search (:data:`TEACHER_RULES`): the
  student's observation does not hold durations, so they could not label its states.
* :class:`HindsightTeacher` plays a window's schedule as labeller: :meth:`~HindsightTeacher.label`
  gives the teacher's action for the acting agent (ordering or placement) in the student's state,
  and :meth:`~HindsightTeacher.observe` tells it the action really taken, so that the schedule's
  per-instant bookkeeping (jobs started or preempted at this instant, a move under way) follows
  the student's trajectory and not the one the teacher would have played.

Public names: :data:`TEACHER_RULES`, :data:`DURATION_RULES`, :data:`TEACHER_FORMAT`, :class:`TeacherWindow`,
:func:`teacher_schedules`, :class:`HindsightTeacher` (and :func:`dual_agent.schedules.schedule_policy`,
re-exported).
"""
from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

import numpy as np

from baselines.obs import is_place_phase
from dual_agent.schedules import schedule_policy

#: The file format of a teacher cache (a list of certificates and the search's settings).
TEACHER_FORMAT = "hetero-cluster-sched/hindsight-teachers"
TEACHER_VERSION = 1
#: The only split teachers are computed on: no test (or validation) window ever teaches.
TEACHER_SPLIT = "train"


#: The search's rules that read true durations (their policies ask for ``clairvoyant=True``).
DURATION_RULES = ("sjf", "srpt-clairvoyant", "srpt+fastest")


def _teacher_rules() -> tuple[str, ...]:
    from baselines.optimality.search import RULES

    # A rule that reads durations the student's observation hides cannot label its states (SJF
    # raises ClairvoyanceRequired there): the clairvoyant references and SJF are left out.
    return tuple(r for r in RULES if r not in DURATION_RULES)


#: Rules the teacher's search starts from (the search's, less those that read durations).
TEACHER_RULES = _teacher_rules()


@dataclass(frozen=True)
class TeacherWindow:
    """One training window's hindsight schedule: its seed, workload digest, the best rule and the
    best-known average JCT (what the schedule scores on the window) and the schedule itself."""
    seed: int
    window: str
    best_rule: str
    best_rule_value: float
    value: float
    schedule: dict


def _settings(scenario: str, episodes: int, jobs_per_episode: Optional[int], env_kwargs: dict) -> dict:
    return {"scenario": scenario, "split": TEACHER_SPLIT, "episodes": int(episodes),
            "jobs_per_episode": jobs_per_episode, "env_kwargs": dict(env_kwargs), "rules": list(TEACHER_RULES)}


def _read_cache(path: Path, settings: dict) -> dict[int, TeacherWindow]:
    """The windows a cache file holds for these settings (none when the file is absent); a file made
    with other settings is refused, naming the field that differs."""
    from baselines.optimality.certificate import parse_certificate

    if not path.exists():
        return {}
    try:
        doc = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise ValueError(f"{path}: not a teacher file (unreadable JSON: {exc})") from None
    if not isinstance(doc, dict) or doc.get("format") != TEACHER_FORMAT or doc.get("version") != TEACHER_VERSION:
        raise ValueError(f"{path}: field format/version is not {TEACHER_FORMAT!r} version {TEACHER_VERSION}")
    for key, want in settings.items():
        if doc.get("settings", {}).get(key) != want:
            raise ValueError(f"{path}: field settings.{key} is {doc.get('settings', {}).get(key)!r}, this run "
                             f"needs {want!r} (pass another --teacher-file or the same settings)")
    out = {}
    for i, item in enumerate(doc.get("windows", [])):
        cert = parse_certificate(item.get("certificate") if isinstance(item, dict) else None,
                                 f"{path}: windows[{i}].certificate")
        if cert.split != TEACHER_SPLIT or cert.scenario != settings["scenario"]:
            raise ValueError(f"{path}: windows[{i}] is a {cert.scenario} {cert.split} window; a teacher file "
                             f"holds {settings['scenario']} {TEACHER_SPLIT} windows only")
        rule, rule_value = item.get("best_rule"), item.get("best_rule_value")
        if not isinstance(rule, str) or not isinstance(rule_value, (int, float)):
            raise ValueError(f"{path}: windows[{i}]: fields best_rule / best_rule_value missing")
        out[cert.seed] = TeacherWindow(cert.seed, cert.window, rule, float(rule_value), cert.avg_jct, cert.schedule)
    return out


def _write_cache(path: Path, settings: dict, windows: dict[int, TeacherWindow]) -> None:
    from baselines.harness.files import atomic_write
    from baselines.optimality.certificate import Certificate

    items = []
    for seed in sorted(windows):
        w = windows[seed]
        cert = Certificate(settings["scenario"], TEACHER_SPLIT, w.seed, w.window, w.value, w.schedule,
                           found_by=f"hindsight search, {settings['episodes']} compiled episodes")
        items.append({"certificate": cert.to_json(), "best_rule": w.best_rule, "best_rule_value": w.best_rule_value})
    text = json.dumps({"format": TEACHER_FORMAT, "version": TEACHER_VERSION, "settings": settings,
                       "windows": items}, indent=1)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, lambda f: f.write(text + "\n"))


def teacher_schedules(scenario: str, seeds: Sequence[int], episodes: int = 60,
                      jobs_per_episode: Optional[int] = None, env_kwargs: Optional[dict] = None,
                      path: "Optional[str | Path]" = None,
                      progress: Optional[Callable[[TeacherWindow], None]] = None) -> list[TeacherWindow]:
    """The hindsight schedule of each training window ``seeds`` (split ``"train"``), searched within
    ``episodes`` compiled episodes per window (rules included) on windows of ``jobs_per_episode``
    jobs; with ``path``, windows already in that file are read from it and new ones are added to it
    (written after each window, atomically). Deterministic: the search's seed is fixed.
    """
    from baselines.optimality.search import search_window

    if isinstance(episodes, bool) or not isinstance(episodes, int) or episodes < len(TEACHER_RULES):
        raise ValueError(f"teacher episodes must be an integer >= {len(TEACHER_RULES)} (one per rule), got {episodes!r}")
    env_kwargs = dict(env_kwargs or {})
    if jobs_per_episode is not None:
        env_kwargs["jobs_per_episode"] = int(jobs_per_episode)
    settings = _settings(scenario, episodes, jobs_per_episode, env_kwargs)
    cache = Path(path) if path is not None else None
    known = _read_cache(cache, settings) if cache is not None else {}
    out = []
    for seed in seeds:
        seed = int(seed)
        if seed not in known:
            r = search_window(scenario, TEACHER_SPLIT, seed, episodes=episodes, rules=TEACHER_RULES,
                              env_kwargs=env_kwargs or None)
            known[seed] = TeacherWindow(seed, r.window, r.best_rule, r.best_rule_value, r.value, r.schedule)
            if cache is not None:
                _write_cache(cache, settings, known)
            if progress is not None:
                progress(known[seed])
        out.append(known[seed])
    return out


class HindsightTeacher:
    """A window's schedule as the labeller of the student's states.

    Args:
        schedule: a certificate schedule (:func:`teacher_schedules` gives one per window).
        scenario: the scenario (rules such as ``gittins`` read its training distribution).
    """

    def __init__(self, schedule: dict, scenario: str) -> None:
        self.schedule = dict(schedule)
        self.policy = schedule_policy(schedule, scenario)
        self.orderer = getattr(self.policy, "orderer", None)
        self._state: Optional[dict] = None
        self._label: Optional[tuple[int, int]] = None

    def reset(self, seed: Optional[int] = None) -> None:
        self.policy.reset(seed)
        self._state, self._label = None, None

    def label(self, observations: dict, infos: dict) -> tuple[int, int]:
        """(acting agent: 0 orderer, 1 placer; the teacher's action) in this state. The next call
        must be :meth:`observe` with the action the episode really took."""
        agent = 1 if is_place_phase(observations["orderer"]) else 0
        if agent == 0 and self.orderer is not None:
            self._roll_instant(float(infos["orderer"]["time"]))
            self._state = _snapshot(self.orderer)
        act = self.policy.act(observations, infos)
        self._label = (agent, int(act["placer" if agent else "orderer"]))
        return self._label

    def observe(self, observations: dict, infos: dict, action: int) -> None:
        """The action taken in the state last labelled. When it is not the teacher's, the
        orderer's bookkeeping is put back and then updated with the student's start or preemption."""
        if self._label is None:
            raise RuntimeError("observe() follows label() of the same state")
        agent, label = self._label
        self._label = None
        if agent == 1 or self.orderer is None or action == label or self._state is None:
            return
        self.orderer.__dict__.update(self._state)
        obs, info = observations["orderer"], infos["orderer"]
        if action >= len(obs["action_mask"]) - 1:      # advance
            return
        job, now = int(np.asarray(info["job_ids"])[action]), float(info["time"])
        from baselines.obs import J

        if obs["jobs"][action, J["running"]] > 0.5:    # the student preempted it
            if isinstance(getattr(self.orderer, "_preempted_now", None), set):
                self.orderer._preempted_now.add(job)
                self.orderer._stopped_at[job] = now
        elif isinstance(getattr(self.orderer, "_started_now", None), set):
            self.orderer._started_now.add(job)

    def _roll_instant(self, now: float) -> None:
        # The orderers forget the instant's bookkeeping when time moves; doing it before the
        # snapshot keeps a restored state on the current instant.
        o = self.orderer
        if hasattr(o, "_now") and now != o._now:
            o._now, o._started_now, o._preempted_now = now, set(), set()


def _snapshot(orderer: Any) -> dict:
    """The orderer's private per-episode state (sets, dicts, the move under way), copied."""
    return {k: copy.copy(v) for k, v in vars(orderer).items() if k.startswith("_")}


__all__ = ["DURATION_RULES", "TEACHER_FORMAT", "TEACHER_RULES", "HindsightTeacher", "TeacherWindow", "schedule_policy",
           "teacher_schedules"]
