"""What makes ``cluster-bench`` answer a user's mistake in one line: the error type, the parser
that raises it instead of printing its usage, checks of a ``run`` before its first episode, and
the listing of ``cluster-bench policies``."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Optional, Sequence


class UsageError(Exception):
    """A user's mistake: printed as one line plus a hint, exit code 2, no traceback."""

    def __init__(self, message: str, hint: str = "", prog: str = "") -> None:
        super().__init__(message)
        self.hint, self.prog = hint, prog


class OneLineParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose errors are :class:`UsageError` (one line and a hint)."""

    def error(self, message: str):  # type: ignore[override]
        raise UsageError(message, f"{self.prog} --help", prog=self.prog)


#: Errors shown as one line (exit 2) unless ``--debug``: bad arguments, files, names and values.
USER_ERRORS = (UsageError, ValueError, TypeError, KeyError, LookupError, OSError, ImportError,
               argparse.ArgumentTypeError)


def report(exc: BaseException, prog: str, stream=None) -> int:
    """Print ``exc`` as ``prog: error: ...`` plus a ``hint:`` line; return the exit code 2."""
    stream = stream or sys.stderr
    prog = getattr(exc, "prog", "") or prog
    message = str(exc.args[0]) if isinstance(exc, KeyError) and exc.args else str(exc)
    message = " ".join(message.split()) or type(exc).__name__
    hint = getattr(exc, "hint", "") or f"add --debug to see where it failed; {prog} --help lists the options"
    print(f"{prog}: error: {message}", file=stream)
    print(f"hint: {hint}", file=stream)
    return 2


def pop_flag(argv: Sequence[str], flag: str) -> tuple[list[str], bool]:
    """``argv`` without ``flag`` (accepted anywhere on the line) and whether it was there."""
    argv = list(argv)
    found = flag in argv
    return [a for a in argv if a != flag], found


def check_output_folder(path: "str | Path", flag: str = "--out", hint: str = "") -> Path:
    """Create ``path`` if needed and make sure a file can be written there (the hint names ``flag``,
    the option that chose the folder, unless ``hint`` is given)."""
    from baselines.harness.files import check_folder

    return check_folder(path, flag, hint=hint or f"give a folder that can be written, e.g. {flag} results")


def check_training_split_policies(names: Sequence[str], scenario: str, split: str, env_kwargs: dict,
                                  parsed: Optional[Sequence[object]] = None) -> None:
    """Refuse, before any episode, a policy whose rule needs the scenario's training split
    (``gittins``) on a world without one apart from the played jobs (a user's ``--workload-csv``).
    ``parsed``: each name's parsed baseline name where the caller has it (None for other policies),
    read instead of parsing the names again."""
    from baselines.registry import needs_training_split

    if not env_kwargs.get("workload_csv"):
        return
    given = list(parsed) if parsed is not None else [None] * len(names)
    wanting = [n for n, p in zip(names, given) if needs_training_split(p if p is not None else n)]
    if not wanting:
        return
    import cluster_env
    from baselines.gittins import check_training_split

    env = cluster_env.parallel_env(scenario, split=split, **env_kwargs)
    try:
        check_training_split(getattr(env, "unwrapped", env).scenario)
    except ValueError as exc:
        raise UsageError(str(exc), f"leave out {', '.join(wanting)} on a --workload-csv run") from exc


def csv_overrides(args: argparse.Namespace) -> list[str]:
    """``--workload-csv`` / ``--cluster-csv`` / ``--reference-gpu`` as ``--env`` items."""
    items = []
    for flag, key in (("workload_csv", "workload_csv"), ("cluster_csv", "cluster_csv"),
                      ("reference_gpu", "reference_gpu")):
        value = getattr(args, flag, None)
        if value is not None:
            if key.endswith("_csv") and not Path(value).is_file():
                raise UsageError(f"--{flag.replace('_', '-')} {value}: no such file",
                                 "give the path of your CSV file (examples/data/ has two)")
            items.append(f"{key}={str(value)!r}")
    return items


def column_overrides(args: argparse.Namespace) -> list[str]:
    """``--workload-columns`` / ``--cluster-columns`` ``FIELD=COLUMN,...`` as ``--env`` items: the
    ``workload_columns=`` / ``cluster_columns=`` mappings of ``parallel_env``, which the loaders
    check with the same messages; an empty ``COLUMN`` (``job_type=``) ignores an optional field."""
    items = []
    for flag, csv_flag in (("workload_columns", "workload_csv"), ("cluster_columns", "cluster_csv")):
        text = getattr(args, flag, None)
        if text is None:
            continue
        name = "--" + flag.replace("_", "-")
        if getattr(args, csv_flag, None) is None:
            raise UsageError(f"{name} maps the columns of --{csv_flag.replace('_', '-')}, which is not given",
                             f"add --{csv_flag.replace('_', '-')} FILE")
        mapping: dict = {}
        for part in filter(None, (p.strip() for p in text.split(","))):
            field, sep, column = part.partition("=")
            if not sep or not field.strip():
                raise UsageError(f"{name} takes FIELD=COLUMN pairs separated by commas, got {part!r}",
                                 f"e.g. {name} submit_time=submission_time,num_gpus=num_gpu")
            if field.strip() in mapping:
                raise UsageError(f"{name}: field {field.strip()!r} is mapped twice", "map each field once")
            mapping[field.strip()] = column.strip() or None
        items.append(f"{flag}={mapping!r}")
    return items


def custom_trace_notes(scenario: str, split: str, env_kwargs: dict) -> list[str]:
    """What a run on a user's trace should say about it: the job types drawn for jobs that had
    none (recorded in the workload's report as well), and that windows shorter than the trace
    start at random jobs and can overlap while the paired statistics count them as independent."""
    import numpy as np

    import cluster_env
    from cluster_env.world.throughputs import JOB_TYPES

    if not env_kwargs.get("workload_csv"):
        return []
    env = cluster_env.parallel_env(scenario, split=split, **env_kwargs)
    workload = env.scenario.workload()
    env.close()
    notes = []
    for note in (workload.report.notes if workload.report else []):
        if "no job type" in note:
            counts = np.bincount(workload.job_type, minlength=len(JOB_TYPES))
            mix = ", ".join(f"{JOB_TYPES[i]} x{int(c)}" for i, c in enumerate(counts) if c)
            notes.append(f"{note}; the trace's job types now: {mix}")
    size = env_kwargs.get("jobs_per_episode")
    if not (isinstance(size, int) and 0 < size < workload.num_jobs):
        notes.append(f"every seed plays all {workload.num_jobs} jobs of {Path(str(env_kwargs['workload_csv'])).name}: "
                     "one window, and the seeds are its world draws; the paired intervals rest on them, per "
                     "(window, seed), not on windows, and carry no verdict (--env jobs_per_episode=N plays "
                     "N-job windows of the trace)")
    if isinstance(size, int) and 0 < size < workload.num_jobs:
        notes.append(f"each seed plays {size} consecutive jobs of the {workload.num_jobs} in "
                     f"{Path(str(env_kwargs['workload_csv'])).name} from a random start: windows can overlap "
                     "(share jobs), and the paired ratios and intervals treat them as independent windows")
    return notes


def policy_listing(scenario: Optional[str] = None) -> str:
    """The text of ``cluster-bench policies``: named baselines, orderers, placers, compositions,
    policies registered by entry points."""
    from baselines.registry import LAS_QUANTUM_FAMILY, NAMED, ORDERERS, PLACERS
    from baselines.harness.sweep import plugin_policy_names

    lines = ["named baselines (ORDERER+PLACER):"]
    lines += [f"  {name:<10} = {o}+{p}" for name, (o, p) in NAMED.items()]
    lines.append(f"orderers: {', '.join(ORDERERS)}, {LAS_QUANTUM_FAMILY} (las with a minimum quantum, "
                 f"e.g. las-q15 = las-q15+{NAMED['las'][1]})")
    lines.append(f"placers:  {', '.join(PLACERS)}")
    lines.append(f"compositions: any ORDERER+PLACER ({len(ORDERERS) * len(PLACERS)}), e.g. sjf+fastest, tiresias+spread")
    plugins = plugin_policy_names()
    if plugins:
        lines.append("registered by packages (entry points 'cluster_bench.policies'):")
        lines += [f"  {name:<10} ({source})" for name, source in plugins.items()]
    lines.append("your own: package.module:attribute (a policy object or a class), resolved from the current folder")
    lines.append("a trained agent: path/to/model.zip (baselines.save_agent, or SB3's own model.save; needs the rl extra)")
    return "\n".join(lines)


def replay(scenario: str, split: str, policy_name: str, seed: int, env_kwargs: dict, gif: Optional[str],
           max_frames: int = 200, fps: float = 4.0, stream=None) -> int:
    """Run one episode of ``policy_name`` and show it: a frame at each instant where the clock
    moved (at most ``max_frames``, evenly spread), as an animated GIF or as text."""
    import cluster_env
    from baselines.harness.episode import env_settings
    from baselines.harness.sweep import resolve_policy

    stream = stream or sys.stdout
    policy = resolve_policy(policy_name, scenario)
    mode = "rgb_array" if gif else "ansi"
    env = cluster_env.parallel_env(scenario, split=split, render_mode=mode,
                                   **env_settings(policy, env_kwargs, False, scenario))   # made for it?
    if gif:
        from baselines.harness.files import check_target

        check_target(Path(gif), "--gif")
        check_output_folder(Path(gif).absolute().parent, "--gif",
                            "write the GIF elsewhere, e.g. --gif /tmp/episode.gif")
    policy.reset(seed)
    obs, infos = env.reset(seed=seed)
    # First pass: the instants (a replay is cheap, frames are not): then draw the chosen ones.
    instants, last = [], None
    while env.agents:
        if infos["orderer"]["phase"] == "order" and infos["orderer"]["time"] != last:
            instants.append(env.num_steps)
            last = infos["orderer"]["time"]
        obs, _, _, _, infos = env.step(policy.act(obs, infos))
    # At most max_frames, evenly spread, the first instant and the final state among them.
    points = list(dict.fromkeys([*instants, env.num_steps]))
    if len(points) > max_frames:
        points = [points[-1]] if max_frames == 1 else \
            [points[round(i * (len(points) - 1) / (max_frames - 1))] for i in range(max_frames)]
    keep = set(points)
    policy.reset(seed)
    obs, infos = env.reset(seed=seed)
    frames = []
    while True:
        if env.num_steps in keep:
            frames.append(env.render())
        if not env.agents:
            break
        obs, _, _, _, infos = env.step(policy.act(obs, infos))
    name = getattr(policy, "name", policy_name)
    if gif:
        from PIL import Image

        from baselines.harness.files import atomic_write

        images = [Image.fromarray(f) for f in frames]
        atomic_write(gif, lambda fh: images[0].save(fh, format="GIF", save_all=True, append_images=images[1:],
                                                     duration=max(1, round(1000 / fps)), loop=0), binary=True)
        print(f"{scenario} / {split} / seed {seed} / {name}: {len(frames)} frames of {env.num_steps} steps -> {gif}",
              file=stream)
    else:
        for text in frames:
            print(text, "\n", file=stream)
    env.close()
    return 0


#: Seeds (windows) of ``run``, ``compare`` and ``sweep`` when ``--seeds`` is not given.
DEFAULT_SEEDS = "0-19"
#: The most seeds one ``--seeds`` may list (a typo such as 0-99999999999 would fill the memory).
MAX_SEEDS = 100_000
#: The most episode worker processes ``--workers`` may ask for (each holds a simulator).
MAX_WORKERS = 256


def parse_seeds(text: str) -> list[int]:
    """``"0-4"`` -> [0, 1, 2, 3, 4]; ``"0,3,7"`` -> [0, 3, 7]; ``"5"`` -> [5]; at most ``MAX_SEEDS``."""
    seeds: list[int] = []
    try:
        for part in text.split(","):
            part = part.strip()
            if "-" in part[1:]:
                lo, hi = part.split("-", 1) if not part.startswith("-") else (part, part)
                if len(seeds) + max(0, int(hi) - int(lo) + 1) > MAX_SEEDS:
                    raise argparse.ArgumentTypeError(
                        f"{text!r} lists {len(seeds) + int(hi) - int(lo) + 1:,} seeds; at most {MAX_SEEDS:,} "
                        "(each seed is one episode per policy)")
                seeds.extend(range(int(lo), int(hi) + 1))
            elif part:
                seeds.append(int(part))
    except ValueError:
        raise argparse.ArgumentTypeError(f"seeds must look like 0-4 or 0,3,7; got {text!r}") from None
    if len(seeds) > MAX_SEEDS:
        raise argparse.ArgumentTypeError(f"{text!r} lists {len(seeds):,} seeds; at most {MAX_SEEDS:,}")
    if not seeds:
        raise argparse.ArgumentTypeError(f"no seeds in {text!r}")
    if min(seeds) < 0:
        raise argparse.ArgumentTypeError(f"seeds must be >= 0; got {text!r}")
    if len(set(seeds)) != len(seeds):
        from collections import Counter

        twice = sorted(s for s, k in Counter(seeds).items() if k > 1)[:5]
        raise argparse.ArgumentTypeError(f"{text!r} lists seed{'s' * (len(twice) > 1)} "
                                         f"{', '.join(map(str, twice))} more than once (each seed is one window)")
    return seeds
