"""Regenerate ``cluster_env/data/sia/sia_figures.json`` from a local copy of Sia's artifact.

The Sia (SOSP'23) artifact repository, ``siasosp23/artifacts``, carries no licence, so the package
does not ship its raw placement profiles of the ``azure`` (V100) and ``dgx-ext`` (A100) servers. It
ships the figures its rules read, taken from those files by this script, with the sha256 of every
file read (``cluster_env/data/sia/SOURCES.md``). Anyone with a copy of the artifact can rebuild the
figures and compare::

    git clone https://github.com/siasosp23/artifacts && git -C artifacts checkout aaf7a0d
    python benchmarks/derive_sia_figures.py --artifact artifacts --check   # exit 1 if they differ
    python benchmarks/derive_sia_figures.py --artifact artifacts           # rewrite the file

What is taken (each row keeps the measured step time, s per step, all-reduce included; the
``sync_time`` column is not read):

* ``one_gpu``, every server: ``[local_bsz, step_time]`` of every row at placement ``"1"`` (one GPU),
  by local batch size. The speed rules (``cluster_env/world/measured_speeds.py``) and the one-GPU
  step times of the communication fit read these.
* ``cross_node``, ``dgx-ext`` only: ``[placement, local_bsz, step_time, one_node_step_time]`` of
  every row whose placement spans two or more nodes (placement: GPUs per node, one digit a node)
  with at most 8 GPUs in all, and whose GPU count is profiled on one node at the same local batch
  size (``one_node_step_time``: that row's step time), in the file's row order. The communication
  fit of ``cluster_env/world/comm_calibration.py`` and its 1+7 / 4+4 split ratios read these.

Floats are written as Python's shortest round-trip repr (``json``), so the package reads the very
values it read from the CSV files. The script uses the standard library only and refuses a file with
a missing column, a bad value or a repeated (placement, local batch size) pair.
"""
from __future__ import annotations

import argparse
import csv
import hashlib
import io
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "cluster_env" / "data" / "sia" / "sia_figures.json"

REPOSITORY = "https://github.com/siasosp23/artifacts"
COMMIT = "aaf7a0de7b6cb5eab06ea020467ede5d2fd18e70"
MODELS = ("bert", "cifar10", "deepspeech2", "imagenet", "ncf", "yolov3")
#: Servers whose figures are derived here (the ``aws`` T4 files ship raw: Apache-2.0 via Pollux).
SERVERS = {"azure": "8 x V100-SXM2-32GB with NVLink (Azure ND40rs_v2)",
           "dgx-ext": "8 x A100-SXM4-40GB with NVLink (DGX A100), extended batch sizes"}
#: The servers whose multi-node rows the communication fit reads.
CROSS_NODE_SERVERS = ("dgx-ext",)
#: Largest GPU count of a cross-node row with a one-node twin (a DGX A100 node holds 8).
NODE_GPUS = 8
#: sha256 of each source file at :data:`COMMIT` (the files this package's figures come from).
PINNED_SHA256 = {
    "bert/placements-azure.csv": "e8e75855eae8f66ec80ce9dcd700dc65ac86b8424f4cd87f6a71aa1f4a55c994",
    "bert/placements-dgx-ext.csv": "f2c2508ff6f64f17a0526fcf5c779b4768a7baf567f6d6aba713973d74b59d4a",
    "cifar10/placements-azure.csv": "19a602e8d730b20f48cd896404aabd70697e118d1933c837272c259ca31d984d",
    "cifar10/placements-dgx-ext.csv": "d01db208317cef3774a89f97f1d9f9de0d842f1324a86e94d99cf92a788c4abf",
    "deepspeech2/placements-azure.csv": "a3f37a49db3c6a7468da0cf7e199106bfb9a1d78d73da778f5cb1a8c61ac1798",
    "deepspeech2/placements-dgx-ext.csv": "ee7e1fbe8ea81c966171c33a6c480d5229b31e824009e0e614411ecbadfff5da",
    "imagenet/placements-azure.csv": "364652b5962d27df1046a40bc86c5ff48c7b9b7016912a2ad9c87b1af7f54a0b",
    "imagenet/placements-dgx-ext.csv": "d8bbaeb7de365e1060d21195cf180b47a562b95d6cb8f9e8fbfb02a797966a4b",
    "ncf/placements-azure.csv": "18efd07c05eb8967ce6522ffda76e1f07dccd6f193f65099ed037d0656dbd604",
    "ncf/placements-dgx-ext.csv": "e8299ed413cfdd90db0db7fca4a943392c1afd96687f641b6959886a49104961",
    "yolov3/placements-azure.csv": "374c362fd81815db54af99d07fe975463a0ef05b65e7118f0114cc22288012f0",
    "yolov3/placements-dgx-ext.csv": "508a01c8fd5e8c7d22bd1159fb2f51f6d3e1ac30ff4abfb7e388c434226af368",
}
COLUMNS = ("placement", "local_bsz", "step_time")
RULE = ("one_gpu: [local_bsz, step_time] of every placement-'1' row, by local_bsz. cross_node (dgx-ext): "
        "[placement, local_bsz, step_time, one_node_step_time] of every row spanning >= 2 nodes with <= 8 GPUs "
        "in all whose GPU count n is profiled on one node (placement str(n)) at the same local_bsz, in file "
        "order. step_time in s per step (all-reduce included); floats as Python's shortest round-trip repr.")


def traces_dir(artifact: Path) -> Path:
    """The ``traces`` folder of an artifact checkout (or the folder itself if it is one)."""
    for d in (artifact / "sia-simulator" / "traces", artifact):
        if (d / MODELS[0] / f"placements-{next(iter(SERVERS))}.csv").is_file():
            return d
    raise SystemExit(f"{artifact}: no sia-simulator/traces/<model>/placements-<server>.csv here")


def read_rows(path: Path, data: bytes) -> list:
    """``(placement, local_bsz, step_time)`` of every row, checked."""
    rows = list(csv.DictReader(io.StringIO(data.decode("utf-8"))))
    if not rows or any(c not in rows[0] for c in COLUMNS):
        raise SystemExit(f"{path}: lacks one of the columns {COLUMNS}")
    out, seen = [], set()
    for i, r in enumerate(rows, start=2):
        try:
            q, b, t = r["placement"], int(r["local_bsz"]), float(r["step_time"])
        except (TypeError, ValueError):
            raise SystemExit(f"{path}, row {i}: bad value") from None
        if not (q.isdigit() and b > 0 and t > 0):
            raise SystemExit(f"{path}, row {i}: placement {q!r}, local_bsz {b}, step_time {t}")
        if (q, b) in seen:
            raise SystemExit(f"{path}, row {i}: placement {q!r} at local_bsz {b} twice")
        seen.add((q, b))
        out.append((q, b, t))
    return out


def derive(rows: list, cross_node: bool) -> dict:
    """The figures of one profile (module docstring)."""
    fig = {"one_gpu": sorted([b, t] for q, b, t in rows if q == "1")}
    if cross_node:
        single = {(q, b): t for q, b, t in rows}
        fig["cross_node"] = [[q, b, t, single[(str(sum(map(int, q))), b)]] for q, b, t in rows
                             if len(q) >= 2 and sum(map(int, q)) <= NODE_GPUS
                             and (str(sum(map(int, q))), b) in single]
    return fig


def build(artifact: Path, commit: str = COMMIT) -> str:
    """The text of ``sia_figures.json`` from ``artifact``'s files."""
    traces = traces_dir(artifact)
    sources, figures = [], {}
    for model in MODELS:
        for server in SERVERS:
            name = f"{model}/placements-{server}.csv"
            data = (traces / name).read_bytes()
            sha = hashlib.sha256(data).hexdigest()
            if commit == COMMIT and sha != PINNED_SHA256[name]:
                raise SystemExit(f"{traces / name}: sha256 {sha} is not the file of {COMMIT[:7]} "
                                 "(pass --commit to record another commit)")
            rows = read_rows(traces / name, data)
            sources.append({"path": f"sia-simulator/traces/{name}", "sha256": sha, "rows": len(rows)})
            figures.setdefault(model, {})[server] = derive(rows, server in CROSS_NODE_SERVERS)
    doc = {
        "what": "Figures taken from Sia's placement profiles of the V100 (azure) and A100 (dgx-ext) servers; "
                "the raw files are not shipped (the artifact repository has no licence).",
        "provenance": {
            "repository": REPOSITORY, "commit": commit, "licence": "none (no licence file in the repository)",
            "cite": "S. Jayaram Subramanya, D. Arfeen, S. Lin, A. Qiao, Z. Jia, G. R. Ganger, Sia: "
                    "Heterogeneity-aware, goodput-optimized ML-cluster scheduling, SOSP 2023",
            "generator": "benchmarks/derive_sia_figures.py", "rule": RULE, "servers": SERVERS,
            "sources": sources,
        },
        "figures": figures,
    }
    return _dump(doc)


def _dump(doc: dict) -> str:
    """JSON with one row (a list, or a source's dict) a line, for readable diffs; keys in insertion order."""
    def fmt(x, depth: int) -> str:
        pad, inner = " " * depth, " " * (depth + 1)
        if isinstance(x, dict) and x:
            return "{\n" + ",\n".join(f"{inner}{json.dumps(k)}: {fmt(v, depth + 1)}" for k, v in x.items()) \
                + f"\n{pad}}}"
        if isinstance(x, list) and x and all(isinstance(e, (list, dict)) for e in x):
            return "[\n" + ",\n".join(inner + json.dumps(e) for e in x) + f"\n{pad}]"
        return json.dumps(x)

    return fmt(doc, 0) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--artifact", type=Path, required=True,
                        help="a local copy of siasosp23/artifacts (or of its sia-simulator/traces folder)")
    parser.add_argument("--out", type=Path, default=OUT, help=f"file to write or check (default {OUT.relative_to(ROOT)})")
    parser.add_argument("--check", action="store_true", help="compare with --out instead of writing; exit 1 if it differs")
    parser.add_argument("--commit", default=COMMIT, help="the artifact commit to record (default: the pinned one, "
                                                         "whose files' sha256 are then checked)")
    args = parser.parse_args(argv)
    text = build(args.artifact, args.commit)
    if args.check:
        same = args.out.is_file() and args.out.read_bytes() == text.encode("utf-8")
        print(f"{args.out}: {'identical to' if same else 'DIFFERS from'} the figures derived from {args.artifact}")
        return 0 if same else 1
    args.out.write_bytes(text.encode("utf-8"))
    print(f"wrote {args.out} ({len(text.encode('utf-8')):,} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
