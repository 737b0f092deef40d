"""The shipped optimality table of a scenario: per test seed, a certified lower bound on the
average JCT of every schedule of that window and world draw, and the best-known schedule's value.

File ``baselines/optimality/tables/<scenario>.json``::

    {"scenario": "philly-v1", "split": "test", "metric": "avg_jct",
     "windows": {"0": {"window": "<workload digest>", "lower_bound": 1234.5,
                        "best_known": 2345.6, "best_known_by": "<how: search and budget>",
                        "best_rule": "las-migrate", "best_rule_value": 2400.1,
                        "bound_parts": {...}, "search_episodes": 98}, ...}}
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping, Optional

TABLES_DIR = Path(__file__).resolve().parent / "tables"


@dataclass(frozen=True)
class WindowReference:
    """The optimality facts of one (scenario, split, seed) window under its default world draw."""
    seed: int
    window: str                  # digest of the window's workload (records' ``window`` field)
    lower_bound: float           # certified: no schedule's average JCT is below it (seconds)
    best_known: float            # average JCT of the best schedule found, replayable (seconds)
    best_known_by: str = ""      # what found it (search, budget, or a user's verified submission)
    best_rule: str = ""          # the best of the search's rules on this window (picked in hindsight)
    best_rule_value: float = math.nan   # its average JCT (seconds); best_known <= it


def _table_path(scenario: str) -> Path:
    return TABLES_DIR / f"{scenario}.json"


@lru_cache(maxsize=None)
def load_table(scenario: str, split: str = "test") -> "Optional[Mapping[int, WindowReference]]":
    """The shipped references of ``scenario``'s ``split`` windows by seed, or None where none ship."""
    path = _table_path(scenario)
    if not path.is_file():
        return None
    data = json.loads(path.read_text())
    if data.get("split", "test") != split:
        return None
    out = {}
    for key, row in data.get("windows", {}).items():
        out[int(key)] = WindowReference(seed=int(key), window=str(row["window"]),
                                        lower_bound=float(row["lower_bound"]),
                                        best_known=float(row["best_known"]),
                                        best_known_by=str(row.get("best_known_by", "")),
                                        best_rule=str(row.get("best_rule", "")),
                                        best_rule_value=float(row.get("best_rule_value", math.nan)))
    return out


def reference_for(record: Mapping[str, Any]) -> Optional[WindowReference]:
    """The reference of the window an episode record played, or None: only records of the default
    world (no env overrides) whose workload digest matches the table's."""
    if record.get("env") or record.get("truncated"):
        return None
    table = load_table(str(record.get("scenario", "")), str(record.get("split", "")))
    if table is None:
        return None
    ref = table.get(int(record.get("seed", -1)))
    if ref is None or ref.window != str(record.get("window", "")):
        return None
    if not (math.isfinite(ref.lower_bound) and math.isfinite(ref.best_known)):
        return None
    return ref
