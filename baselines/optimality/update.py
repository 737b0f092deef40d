"""Filling and updating a scenario's optimality table: per window the certified lower bound, the
hindsight search's best-known schedule (saved as a certificate) and the best rule's value; and a
user's better schedule, verified before it enters the table.

Rows are written one window at a time (atomically), so an interrupted run keeps what it finished.
A row's best-known value only ever goes down, and only with a certificate that replays to it. The
slow part (the replay, the search) runs unlocked; reading the table, deciding and writing run under
the tables folder's lock (another submit or build waits), and a row's table and certificate are
written as one change: both new, or on any error (a link, a full disk) both old.

Public names: :func:`build_windows`, :func:`refresh_bounds`, :func:`submit_certificate`,
:func:`table_document`.
"""
from __future__ import annotations

import errno
import json
import math
import os
import shutil
import tempfile
import time
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Optional

from baselines.optimality.bound import window_lower_bound
from baselines.optimality.certificate import (SEED_LIMIT, Certificate, CertificateError, certificate_path,
                                              read_json_file, replay, replay_error)
from baselines.optimality.search import search_window
from baselines.optimality.table import TABLES_DIR, load_table


def _table_path(scenario: str, tables_dir: Path) -> Path:
    return Path(tables_dir) / f"{scenario}.json"


#: Largest table file read, in bytes. A row is about 600 bytes (the shipped tables of 100 rows
#: are under 60 KB): 16 MiB holds some 25,000 rows, while a huge or endless file is refused unread.
MAX_TABLE_BYTES = 16 << 20
#: The lock file in a tables folder: held while a table and its certificates are read and written.
LOCK_NAME = ".best-known.lock"


def _finite(x: Any) -> bool:
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return False
    try:
        return math.isfinite(float(x))
    except OverflowError:
        return False


def _check_table(doc: Any, scenario: str, path: Path) -> dict:
    """The table document, its fields checked (one error naming the file, the field and the row)."""
    if not isinstance(doc, dict):
        raise CertificateError(f"{path}: not a table (a JSON object with scenario, split and windows)")
    for key, want in (("scenario", scenario), ("split", "test"), ("metric", "avg_jct")):
        if doc.get(key) != want:
            raise CertificateError(f"{path}: field {key} must be {want!r}, got {doc.get(key)!r:.80}")
    windows = doc.get("windows")
    if not isinstance(windows, dict):
        raise CertificateError(f"{path}: field windows must be an object (seed -> row), got {type(windows).__name__}")
    for key, row in windows.items():
        where = f"{path}: windows.{key:.40}"
        if not (key.isdigit() and str(int(key)) == key and int(key) < SEED_LIMIT):
            raise CertificateError(f"{where}: a row's key must be a seed, an integer in [0, 2**63)")
        if not isinstance(row, dict):
            raise CertificateError(f"{where} must be an object, got {type(row).__name__}")
        if not isinstance(row.get("window"), str) or not row["window"]:
            raise CertificateError(f"{where}: field window must be a non-empty string")
        for field, low in (("lower_bound", 0.0), ("best_known", 0.0)):
            if not (_finite(row.get(field)) and row[field] > low):
                raise CertificateError(f"{where}: field {field} must be a positive finite number, "
                                       f"got {row.get(field)!r:.40}")
        if row["best_known"] < row["lower_bound"]:
            raise CertificateError(f"{where}: field best_known {row['best_known']!r} is below lower_bound "
                                   f"{row['lower_bound']!r}")
    return doc


def table_document(scenario: str, tables_dir: Path = TABLES_DIR) -> dict:
    """The table file's document (an empty one where none exists yet); CertificateError naming the
    file and the field when it is not a table of ``scenario`` (or not a regular file of at most
    :data:`MAX_TABLE_BYTES`)."""
    path = _table_path(scenario, tables_dir)
    if not path.exists() and not path.is_symlink():
        return {"scenario": scenario, "split": "test", "metric": "avg_jct", "windows": {}}
    return _check_table(read_json_file(path, MAX_TABLE_BYTES, "table"), scenario, path)


@contextmanager
def _locked(tables_dir: Path) -> Iterator[None]:
    """Hold the tables folder's lock (an flock on :data:`LOCK_NAME`; another process's update
    waits for it): what is read inside is what the writes inside replace."""
    from baselines.harness.files import OutputError, fcntl

    tables_dir = Path(tables_dir)
    tables_dir.mkdir(parents=True, exist_ok=True)
    path = tables_dir / LOCK_NAME
    try:     # never through a link: the lock file is opened in place
        fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o666)
    except OSError as exc:
        raise OutputError(f"cannot open the lock file {path}: {exc.strerror or exc}",
                          "the tables folder must be writable (and the lock file a regular file)") from None
    try:
        if fcntl is not None:
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)          # closing releases the lock


def _text_of_table(doc: dict) -> str:
    doc["windows"] = dict(sorted(doc["windows"].items(), key=lambda kv: int(kv[0])))
    return json.dumps(doc, indent=1) + "\n"


def _write_together(files: "list[tuple[Path, str]]") -> None:
    """Write each (path, text) as one change: every new file is written and synced beside its
    target first, then all are renamed into place with Ctrl-C held off; on any error every old file
    stays (a file already renamed is put back) and no temporary is left. A target that is a link or
    not a regular file is refused before anything is written."""
    from baselines.harness.files import OutputError, check_target, sigint_deferred

    for path, _ in files:
        if path.is_symlink():
            raise OutputError(f"{path} is a symbolic link (to {os.readlink(path)}); the optimality files are "
                              "written only as regular files, never through or over a link",
                              f"replace the link by the file itself (cp --remove-destination {path.resolve()} {path})")
        check_target(path)
    staged: list[tuple[str, Path]] = []
    backups: list[tuple[Optional[str], Path]] = []     # (old file kept aside or None: there was none, target)
    try:
        for path, text in files:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
            staged.append((tmp, path))
            with os.fdopen(fd, "w") as fh:     # the old file's permissions (mkstemp's 0600 would hide it)
                os.chmod(tmp, (path.stat().st_mode & 0o777) if path.exists() else 0o644)
                fh.write(text)
                fh.flush()
                os.fsync(fh.fileno())
            keep = None
            if path.exists():          # the old file, kept aside so that it can be put back
                keep = f"{tmp}.old"
                try:
                    os.link(path, keep)
                except OSError:        # no hard links on this disk: a copy
                    shutil.copy2(path, keep)
            backups.append((keep, path))
        with sigint_deferred("\n(Ctrl-C: writing the table and its certificate first)\n") as deferred:
            done = 0
            try:
                for tmp, path in staged:
                    os.replace(tmp, path)
                    done += 1
            except BaseException:
                for keep, path in backups[:done]:
                    if keep is None:
                        path.unlink(missing_ok=True)
                    else:
                        os.replace(keep, path)
                raise
        if deferred:               # both files are in place: now the Ctrl-C held off
            raise KeyboardInterrupt
    except OSError as exc:
        if isinstance(exc, OutputError):
            raise
        full = " (is the disk full?)" if exc.errno in (errno.ENOSPC, getattr(errno, "EDQUOT", -1)) else ""
        name = exc.filename or (staged[-1][1] if staged else files[0][0])
        raise OutputError(f"cannot write {name}: {exc.strerror or exc}{full}; the table and its certificate "
                          "are unchanged",
                          "free some space on that disk, or check the folder's permissions") from None
    finally:
        for tmp, _ in staged:
            Path(tmp).unlink(missing_ok=True)
        for keep, _ in backups:
            if keep is not None:
                Path(keep).unlink(missing_ok=True)


def _write_table(scenario: str, doc: dict, tables_dir: Path, cert: Optional[Certificate] = None,
                 cert_path: Optional[Path] = None) -> None:
    """Write the table (and ``cert`` at ``cert_path``: both as one change); the caller holds the lock."""
    files = [] if cert is None else [(Path(cert_path), json.dumps(cert.to_json()) + "\n")]
    _write_together(files + [(_table_path(scenario, tables_dir), _text_of_table(doc))])
    load_table.cache_clear()


def _certificate_target(scenario: str, seed: int, certificates_dir: Optional[Path]) -> Path:
    return (certificate_path(scenario, seed) if certificates_dir is None
            else Path(certificates_dir) / scenario / f"{int(seed)}.json")


def build_windows(scenario: str, seeds: Iterable[int], episodes: int, command: str,
                  tables_dir: Path = TABLES_DIR, certificates_dir: Optional[Path] = None,
                  log: Callable[[str], None] = print) -> list[dict]:
    """Compute and write each window's row: bound, search (``episodes`` compiled episodes), the
    certificate of its best schedule. An existing row keeps its best-known schedule when the new
    search does not beat it. Returns the rows written."""
    rows = []
    budget = f"search: best of {{rules}} then a (1+8)-ES over the priority index, {episodes} compiled episodes; {command}"
    for seed in seeds:
        t0 = time.perf_counter()
        bound = window_lower_bound(scenario, "test", seed)
        found = search_window(scenario, "test", seed, episodes=episodes)
        with _locked(tables_dir):
            row = _enter_found(scenario, seed, bound, found, budget, tables_dir, certificates_dir)
        rows.append(row)
        log(f"{scenario} seed {seed}: bound {bound.avg_jct:,.1f}  best-known {row['best_known']:,.1f}  "
            f"best rule {found.best_rule} {found.best_rule_value:,.1f}  ({time.perf_counter() - t0:.1f} s)")
    return rows


def _enter_found(scenario: str, seed: int, bound: Any, found: Any, budget: str, tables_dir: Path,
                 certificates_dir: Optional[Path]) -> dict:
    """Write the row of a search's result (and its certificate, unless the row's old best-known
    schedule is better); the caller holds the lock."""
    doc = table_document(scenario, tables_dir)
    old = doc["windows"].get(str(seed))
    row = {"window": found.window, "lower_bound": bound.avg_jct, "best_known": found.value,
           "best_known_by": budget.format(rules=len(found.rules)), "best_rule": found.best_rule,
           "best_rule_value": found.best_rule_value, "bound_parts": {
               "per_job": bound.per_job, "pooled_srpt": bound.pooled_srpt, "pooled_busy": bound.pooled_busy,
               "fluctuation_ceiling": bound.fluctuation_ceiling},
           "search_episodes": found.episodes}
    cert = None
    if old and old.get("window") == found.window and float(old["best_known"]) < found.value:
        row["best_known"], row["best_known_by"] = old["best_known"], old.get("best_known_by", "")
    else:
        cert = Certificate(scenario=scenario, split="test", seed=int(seed), window=found.window,
                           avg_jct=found.value, schedule=found.schedule, found_by=row["best_known_by"])
    doc["windows"][str(seed)] = row
    _write_table(scenario, doc, tables_dir, cert, _certificate_target(scenario, seed, certificates_dir))
    return row


def refresh_bounds(scenario: str, seeds: Optional[Iterable[int]] = None, tables_dir: Path = TABLES_DIR) -> int:
    """Recompute the lower bound of the table's rows (``seeds``, default all): the bound changes
    only with the bound's code, so this is how a stronger bound enters the table. Returns the rows
    updated."""
    doc = table_document(scenario, tables_dir)
    keys = [k for k in doc["windows"] if seeds is None or int(k) in set(seeds)]
    bounds = {key: window_lower_bound(scenario, "test", int(key)) for key in keys}
    with _locked(tables_dir):
        doc = table_document(scenario, tables_dir)
        for key, bound in bounds.items():
            row = doc["windows"].get(key)
            if row is None:
                continue
            row["lower_bound"] = bound.avg_jct
            row["bound_parts"] = {"per_job": bound.per_job, "pooled_srpt": bound.pooled_srpt,
                                  "pooled_busy": bound.pooled_busy, "fluctuation_ceiling": bound.fluctuation_ceiling}
        _write_table(scenario, doc, tables_dir)
    return len(keys)


def submit_certificate(cert: Certificate, tables_dir: Path = TABLES_DIR,
                       certificates_dir: Optional[Path] = None, where: str = "certificate") -> tuple[bool, str]:
    """Verify a user's certificate (replayed on both paths, to the last bit) and, when it beats the
    table's best-known value of its window, write it into the table and save it beside the shipped
    ones (table and certificate as one change, under the tables folder's lock: of two submits at
    once the better one stays, whichever finishes last). Returns (updated, message); raises
    :class:`CertificateError` (naming ``where``, the certificate's file, and the field) when it
    does not verify."""
    if cert.split != "test":
        raise CertificateError(f"{where}: field split must be 'test' (the tables hold test windows), got {cert.split!r}")
    table = _table_path(cert.scenario, tables_dir)

    def check_window(row: Optional[dict]) -> None:
        if row is not None and row["window"] != cert.window:
            raise CertificateError(f"{where}: field window {cert.window!r} is not the window {row['window']!r} of "
                                   f"{cert.scenario} seed {cert.seed} in {table}")

    row = table_document(cert.scenario, tables_dir)["windows"].get(str(cert.seed))
    check_window(row)
    result = replay(cert)          # the slow part, unlocked
    error = replay_error(cert, result, where)
    if error is not None:
        raise CertificateError(error)
    # What the table records is what the schedule gives here (both paths, to the last bit).
    cert = replace(cert, avg_jct=result.api)
    bound = window_lower_bound(cert.scenario, "test", cert.seed) if row is None else None
    with _locked(tables_dir):
        # Read again: another submit may have entered its schedule while this one replayed.
        doc = table_document(cert.scenario, tables_dir)
        row = doc["windows"].get(str(cert.seed))
        check_window(row)
        if row is not None and row["best_known"] <= cert.avg_jct:
            return False, (f"verified ({cert.avg_jct!r} on both paths) but not better than the table's best-known "
                           f"{row['best_known']!r}: table unchanged")
        if row is None:
            bound = bound or window_lower_bound(cert.scenario, "test", cert.seed)
            row = {"window": cert.window, "lower_bound": bound.avg_jct}
        if cert.avg_jct < row["lower_bound"]:
            raise CertificateError(f"{where}: field avg_jct {cert.avg_jct!r} is below the certified lower bound "
                                   f"{row['lower_bound']!r}: the bound or the replay is wrong; please report it")
        old = row.get("best_known")
        row["best_known"] = cert.avg_jct
        row["best_known_by"] = f"submitted and verified: {cert.found_by or 'a user schedule'}"
        doc["windows"][str(cert.seed)] = row
        _write_table(cert.scenario, doc, tables_dir, cert,
                     _certificate_target(cert.scenario, cert.seed, certificates_dir))
    return True, f"verified; best-known of {cert.scenario} seed {cert.seed}: {old!r} -> {cert.avg_jct!r}"


__all__ = ["build_windows", "refresh_bounds", "submit_certificate", "table_document"]
