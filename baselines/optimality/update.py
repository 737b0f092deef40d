"""Filling and updating a scenario's optimality table: per window the certified lower bound, the
hindsight search's best-known schedule (saved as a certificate) and the best rule's value; and a
user's better schedule, verified before it enters the table.

Rows are written one window at a time (atomically), so an interrupted run keeps what it finished.
A row's best-known value only ever goes down, and only with a certificate that replays to it.

Public names: :func:`build_windows`, :func:`refresh_bounds`, :func:`submit_certificate`,
:func:`table_document`.
"""
from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path
from typing import Callable, Iterable, Optional

from baselines.optimality.bound import window_lower_bound
from baselines.optimality.certificate import (Certificate, CertificateError, certificate_path, replay,
                                              save_certificate)
from baselines.optimality.search import search_window
from baselines.optimality.table import TABLES_DIR, load_table


def _table_path(scenario: str, tables_dir: Path) -> Path:
    return Path(tables_dir) / f"{scenario}.json"


def table_document(scenario: str, tables_dir: Path = TABLES_DIR) -> dict:
    """The table file's document (an empty one where none exists yet)."""
    path = _table_path(scenario, tables_dir)
    if path.is_file():
        return json.loads(path.read_text())
    return {"scenario": scenario, "split": "test", "metric": "avg_jct", "windows": {}}


def _write_table(scenario: str, doc: dict, tables_dir: Path) -> None:
    from baselines.harness.files import atomic_write

    doc["windows"] = dict(sorted(doc["windows"].items(), key=lambda kv: int(kv[0])))
    atomic_write(_table_path(scenario, tables_dir), lambda f: f.write(json.dumps(doc, indent=1) + "\n"))
    load_table.cache_clear()


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
        doc = table_document(scenario, tables_dir)
        old = doc["windows"].get(str(seed))
        row = {"window": found.window, "lower_bound": bound.avg_jct, "best_known": found.value,
               "best_known_by": budget.format(rules=len(found.rules)), "best_rule": found.best_rule,
               "best_rule_value": found.best_rule_value, "bound_parts": {
                   "per_job": bound.per_job, "pooled_srpt": bound.pooled_srpt, "pooled_busy": bound.pooled_busy,
                   "fluctuation_ceiling": bound.fluctuation_ceiling},
               "search_episodes": found.episodes}
        if old and old.get("window") == found.window and float(old["best_known"]) < found.value:
            row["best_known"], row["best_known_by"] = old["best_known"], old["best_known_by"]
        else:
            cert = Certificate(scenario=scenario, split="test", seed=int(seed), window=found.window,
                               avg_jct=found.value, schedule=found.schedule, found_by=row["best_known_by"])
            target = (certificate_path(scenario, seed) if certificates_dir is None
                      else Path(certificates_dir) / scenario / f"{int(seed)}.json")
            save_certificate(cert, target)
        doc["windows"][str(seed)] = row
        _write_table(scenario, doc, tables_dir)
        rows.append(row)
        log(f"{scenario} seed {seed}: bound {bound.avg_jct:,.1f}  best-known {row['best_known']:,.1f}  "
            f"best rule {found.best_rule} {found.best_rule_value:,.1f}  ({time.perf_counter() - t0:.1f} s)")
    return rows


def refresh_bounds(scenario: str, seeds: Optional[Iterable[int]] = None, tables_dir: Path = TABLES_DIR) -> int:
    """Recompute the lower bound of the table's rows (``seeds``, default all): the bound changes
    only with the bound's code, so this is how a stronger bound enters the table. Returns the rows
    updated."""
    doc = table_document(scenario, tables_dir)
    keys = [k for k in doc["windows"] if seeds is None or int(k) in set(seeds)]
    for key in keys:
        row = doc["windows"][key]
        bound = window_lower_bound(scenario, "test", int(key))
        row["lower_bound"] = bound.avg_jct
        row["bound_parts"] = {"per_job": bound.per_job, "pooled_srpt": bound.pooled_srpt,
                              "pooled_busy": bound.pooled_busy, "fluctuation_ceiling": bound.fluctuation_ceiling}
    _write_table(scenario, doc, tables_dir)
    return len(keys)


def submit_certificate(cert: Certificate, tables_dir: Path = TABLES_DIR,
                       certificates_dir: Optional[Path] = None) -> tuple[bool, str]:
    """Verify a user's certificate (replayed on both paths, to the last bit) and, when it beats the
    table's best-known value of its window, write it into the table and save it beside the shipped
    ones. Returns (updated, message); raises :class:`CertificateError` when it does not verify."""
    if cert.split != "test":
        raise CertificateError(f"the tables hold test windows; this certificate is for split {cert.split!r}")
    doc = table_document(cert.scenario, tables_dir)
    row = doc["windows"].get(str(cert.seed))
    if row is not None and row["window"] != cert.window:
        raise CertificateError(f"field window {cert.window!r} is not the table's window {row['window']!r} of "
                               f"{cert.scenario} seed {cert.seed}")
    result = replay(cert)
    if not result.agrees(cert):
        raise CertificateError(f"the schedule does not reproduce its claim: avg_jct {cert.avg_jct!r}, API "
                               f"{result.api!r}, compiled {result.compiled!r}, window {result.window}")
    # What the table records is what the schedule gives here (both paths, to the last bit).
    cert = replace(cert, avg_jct=result.api)
    if row is not None and row["best_known"] <= cert.avg_jct:
        return False, (f"verified ({cert.avg_jct!r} on both paths) but not better than the table's best-known "
                       f"{row['best_known']!r}: table unchanged")
    if row is None:
        bound = window_lower_bound(cert.scenario, "test", cert.seed)
        row = {"window": cert.window, "lower_bound": bound.avg_jct}
    if cert.avg_jct < row["lower_bound"]:
        raise CertificateError(f"avg_jct {cert.avg_jct!r} is below the certified lower bound {row['lower_bound']!r}: "
                               "the bound or the replay is wrong; please report it")
    old = row.get("best_known")
    row["best_known"] = cert.avg_jct
    row["best_known_by"] = f"submitted and verified: {cert.found_by or 'a user schedule'}"
    doc["windows"][str(cert.seed)] = row
    target = (certificate_path(cert.scenario, cert.seed) if certificates_dir is None
              else Path(certificates_dir) / cert.scenario / f"{cert.seed}.json")
    save_certificate(cert, target)
    _write_table(cert.scenario, doc, tables_dir)
    return True, f"verified; best-known of {cert.scenario} seed {cert.seed}: {old!r} -> {cert.avg_jct!r}"


__all__ = ["build_windows", "refresh_bounds", "submit_certificate", "table_document"]
