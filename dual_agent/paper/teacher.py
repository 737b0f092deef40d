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
  without running anything from it; a cached window's claims are replayed before it teaches). The rules that read durations (the clairvoyant references
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
import math
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


#: Largest teacher file read, in bytes. A window's entry (a certificate and its best rule) is about
#: 1 KB, so 64 MiB holds some 60,000 windows, far beyond any run's teacher windows, while a huge or
#: endless file is refused before it is read.
MAX_TEACHER_BYTES = 64 << 20


def _positive(x: Any) -> bool:
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return False
    try:
        return math.isfinite(float(x)) and x > 0
    except OverflowError:
        return False


def _check_teacher_schedule(schedule: dict, where: str) -> None:
    """A teacher's schedule is what the teacher search makes: one of :data:`TEACHER_RULES` (no
    rule that reads durations: the student's states hide them), or the index on one of the
    search's placers."""
    from baselines.optimality.search import SEARCH_PLACERS

    if schedule["kind"] == "rule" and schedule["policy"] not in TEACHER_RULES:
        raise ValueError(f"{where}: field certificate.schedule.policy must be one of the teacher rules "
                         f"{list(TEACHER_RULES)}, got {schedule['policy']!r}")
    if schedule["kind"] == "priority" and schedule["placer"] not in SEARCH_PLACERS:
        raise ValueError(f"{where}: field certificate.schedule.placer must be one of {list(SEARCH_PLACERS)}, "
                         f"got {schedule['placer']!r}")


def _read_cache(path: Path, settings: dict, rows: Optional[dict] = None) -> dict[int, TeacherWindow]:
    """The windows a cache file holds for these settings (none when the file is absent); a file made
    with other settings, or with a field of the wrong kind, is refused, naming the field. The
    values are checked against a replay when a window is used (:func:`_verify_window`). ``rows``
    receives each seed's position in the file's ``windows``."""
    from baselines.optimality.certificate import parse_certificate, read_json_file

    if not path.exists() and not path.is_symlink():
        return {}
    doc = read_json_file(path, MAX_TEACHER_BYTES, "teacher file", ValueError)
    if not isinstance(doc, dict) or doc.get("format") != TEACHER_FORMAT or doc.get("version") != TEACHER_VERSION:
        raise ValueError(f"{path}: field format/version is not {TEACHER_FORMAT!r} version {TEACHER_VERSION}")
    got = doc.get("settings")
    if not isinstance(got, dict):
        raise ValueError(f"{path}: field settings must be an object, got {type(got).__name__}")
    for key, want in settings.items():
        if got.get(key) != want:
            raise ValueError(f"{path}: field settings.{key} is {got.get(key)!r:.80}, this run needs {want!r} "
                             "(pass another --teacher-file or the same settings)")
    windows = doc.get("windows", [])
    if not isinstance(windows, list):
        raise ValueError(f"{path}: field windows must be a list, got {type(windows).__name__}")
    out = {}
    for i, item in enumerate(windows):
        where = f"{path}: windows[{i}]"
        if not isinstance(item, dict):
            raise ValueError(f"{where} must be an object, got {type(item).__name__}")
        cert = parse_certificate(item.get("certificate"), f"{where}.certificate")
        if cert.split != TEACHER_SPLIT or cert.scenario != settings["scenario"]:
            raise ValueError(f"{where} is a {cert.scenario} {cert.split} window; a teacher file "
                             f"holds {settings['scenario']} {TEACHER_SPLIT} windows only")
        _check_teacher_schedule(cert.schedule, where)
        rule, rule_value = item.get("best_rule"), item.get("best_rule_value")
        if rule not in TEACHER_RULES:
            raise ValueError(f"{where}: field best_rule must be one of the teacher rules {list(TEACHER_RULES)}, "
                             f"got {rule!r:.80}")
        if not _positive(rule_value):
            raise ValueError(f"{where}: field best_rule_value must be a positive finite number, got {rule_value!r:.40}")
        if cert.avg_jct > rule_value:
            raise ValueError(f"{where}: field certificate.avg_jct {cert.avg_jct!r} is above best_rule_value "
                             f"{rule_value!r} (the search starts from its best rule)")
        if cert.seed in out:
            raise ValueError(f"{where}: field certificate.seed {cert.seed} is given twice")
        out[cert.seed] = TeacherWindow(cert.seed, cert.window, rule, float(rule_value), cert.avg_jct, cert.schedule)
        if rows is not None:
            rows[cert.seed] = i
    return out


def _verify_window(w: TeacherWindow, settings: dict, where: str) -> None:
    """A cached window's claims replayed in the compiled engine: its seed plays its window, its
    schedule gives its value and its best rule the best rule's value (within the scores' relative
    tolerance: a cache may come from a CPU that rounds ``exp`` differently in the last bit).
    ValueError naming the field otherwise. Two compiled episodes: a few percent of the search's."""
    from baselines.engine import run_compiled_episode, run_weighted_las_episode
    from baselines.harness.scores import DEFAULT_REL_TOL
    from baselines.learned_key import PRIORITY_FEATURES

    scenario, env_kwargs = settings["scenario"], settings["env_kwargs"] or None
    s = w.schedule
    if s["kind"] == "rule":
        played = run_compiled_episode(s["policy"], scenario, TEACHER_SPLIT, w.seed, env_kwargs).record
    else:
        f = len(PRIORITY_FEATURES)
        weights = np.asarray(s["weights"] + s["placer_weights"], dtype=np.float64)
        played = run_weighted_las_episode(weights[:f], s["placer"], scenario, TEACHER_SPLIT, w.seed, env_kwargs,
                                          placer_weights=weights[f:], migrate=s["migrate"]).record
    if played["window"] != w.window:
        raise ValueError(f"{where}: field certificate.window {w.window!r} is not the window that {scenario} "
                         f"{TEACHER_SPLIT} seed {w.seed} plays ({played['window']!r}) with this run's settings")
    rule = run_compiled_episode(w.best_rule, scenario, TEACHER_SPLIT, w.seed, env_kwargs).record
    for field, claim, got in (("certificate.avg_jct", w.value, float(played["avg_jct"])),
                              ("best_rule_value", w.best_rule_value, float(rule["avg_jct"]))):
        if not abs(got - claim) <= DEFAULT_REL_TOL * abs(claim):
            raise ValueError(f"{where}: field {field} {claim!r} is not what the replay gives ({got!r}); "
                             "delete the file (or that window) to search it again")


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
    rows: dict[int, int] = {}
    known = _read_cache(cache, settings, rows) if cache is not None else {}
    out = []
    for seed in seeds:
        seed = int(seed)
        if seed in rows:           # a file's claims are checked before they teach (once)
            _verify_window(known[seed], settings, f"{cache}: windows[{rows.pop(seed)}]")
        elif seed not in known:
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
