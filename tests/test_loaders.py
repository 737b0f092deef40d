"""Loaders: the packaged real traces and clusters, and a user's own CSV files."""
from __future__ import annotations

import collections
import csv
import gzip
import io
import math
from datetime import datetime

import numpy as np
import pytest

from cluster_env.loaders import (assign_job_types, check_workload_fits, cluster_report,
                                 load_cluster_csv, load_workload_csv, openb_cluster, openb_pods,
                                 pai_cluster, philly_cluster, philly_trace, read_cluster_csv,
                                 scale_cluster, spot_cluster)
from cluster_env.loaders.assign import DISTRIBUTED_JOB_TYPES
from cluster_env.loaders.clusters import (OPENB_NODES_FILE, PAI_MACHINES_FILE,
                                          PHILLY_MACHINES_FILE, SPOT_NODES_FILE, natural_key)
from cluster_env.loaders.traces import (CPU_ONLY, NEVER_SCHEDULED, OPENB_PODS_FILE,
                                        OPENB_QOS_CLASSES, PHILLY_FILE, ZERO_DURATION)
from cluster_env.world.throughputs import JOB_TYPES


def raw_rows(path, header=True):
    """The rows of a packaged gzip CSV, read independently with the csv module."""
    with gzip.open(path, "rt", encoding="utf-8", newline="") as f:
        rows = [r for r in csv.reader(f) if r]          # the loaders skip blank lines
    return (rows[0], rows[1:]) if header else (None, rows)


# --------------------------------------------------------------------------- Philly trace
def test_philly_trace_has_every_job_sorted_from_zero():
    w = philly_trace()
    assert w.num_jobs == 82_247
    assert w.submit[0] == 0.0
    assert np.all(np.diff(w.submit) >= 0)
    assert w.gpus.min() == 1 and w.gpus.max() == 128
    assert w.num_tenants == 15 and set(w.tenant.tolist()) == set(range(15))
    assert len(set(w.job_ids)) == w.num_jobs and w.job_ids[0].startswith("philly-")
    assert sorted(w.source_row.tolist()) == list(range(1, 82_248))
    assert w.report.rows_read == 82_247 and w.report.rows_kept == 82_247
    assert w.report.filtered == {}
    assert np.all((w.job_type >= 0) & (w.job_type < len(JOB_TYPES)))
    assert philly_trace() is w                                   # cached


def test_philly_trace_matches_the_raw_file():
    header, rows = raw_rows(PHILLY_FILE)
    assert header == ["timestamp", "duration", "num_gpus", "gpu_time", "cluster"]
    w = philly_trace()
    times = [datetime.fromisoformat(r[0]) for r in rows]
    t0 = min(times)
    # every job: submit, duration, GPUs and tenant as in its source row
    tenant_name = {}
    for k in range(w.num_jobs):
        r = rows[w.source_row[k] - 1]
        assert w.job_ids[k] == f"philly-{w.source_row[k]}"
        assert w.submit[k] == (times[w.source_row[k] - 1] - t0).total_seconds()
        assert w.duration[k] == float(r[1])
        assert w.gpus[k] == int(r[2])
        assert tenant_name.setdefault(int(w.tenant[k]), r[4]) == r[4]
    assert len(set(tenant_name.values())) == 15
    counts = collections.Counter(r[4] for r in rows)
    for t, name in tenant_name.items():
        assert int((w.tenant == t).sum()) == counts[name]
    # ties keep file order (stable sort)
    same = np.flatnonzero(np.diff(w.submit) == 0)
    assert np.all(w.source_row[same] < w.source_row[same + 1])


def test_philly_job_types_follow_the_seeded_rule():
    w0, w1 = philly_trace(0), philly_trace(1)
    assert np.array_equal(w0.job_type, philly_trace(0).job_type)
    assert not np.array_equal(w0.job_type, w1.job_type)
    multi = w0.gpus > 1
    assert np.isin(w0.job_type[multi], DISTRIBUTED_JOB_TYPES).all()
    assert len(np.unique(w0.job_type[~multi])) == len(JOB_TYPES)


# --------------------------------------------------------------------------- openb pods
def test_openb_filter_counts_match_an_independent_count():
    header, rows = raw_rows(OPENB_PODS_FILE)
    col = {h: j for j, h in enumerate(header)}
    cpu = never = zero = kept = frac = 0
    kept_rows = []
    for i, r in enumerate(rows, start=1):
        if r[col["num_gpu"]] == "0":
            cpu += 1
        elif r[col["scheduled_time"]] == "":
            never += 1
        elif int(r[col["deletion_time"]]) - int(r[col["scheduled_time"]]) <= 0:
            zero += 1
        else:
            kept += 1
            kept_rows.append(i)
            if r[col["num_gpu"]] == "1" and int(r[col["gpu_milli"]]) < 1000:
                frac += 1
    w = openb_pods()
    rep = w.report
    assert rep.rows_read == len(rows) == 8_152
    assert rep.filtered.get(CPU_ONLY, 0) == cpu == 1_088
    assert rep.filtered.get(NEVER_SCHEDULED, 0) == never
    assert rep.filtered.get(ZERO_DURATION, 0) == zero
    assert rep.rows_kept == w.num_jobs == kept
    assert sum(rep.filtered.values()) + rep.rows_kept == rep.rows_read
    assert any(note.startswith(f"{frac} pods asked for a fraction") for note in rep.notes)
    assert sorted(w.source_row.tolist()) == kept_rows
    # per job: id, duration, GPUs, tenant (QoS) and rebased submit from its row
    t0 = min(int(rows[i - 1][col["creation_time"]]) for i in kept_rows)
    for k in range(w.num_jobs):
        r = rows[w.source_row[k] - 1]
        assert w.job_ids[k] == r[col["name"]]
        assert w.duration[k] == int(r[col["deletion_time"]]) - int(r[col["scheduled_time"]])
        assert w.gpus[k] == max(1, int(r[col["num_gpu"]]))
        assert OPENB_QOS_CLASSES[w.tenant[k]] == r[col["qos"]]
        assert w.submit[k] == int(r[col["creation_time"]]) - t0
    assert w.submit[0] == 0 and np.all(np.diff(w.submit) >= 0)
    assert w.allowed_gpu_types is None                   # gpu_spec is empty in every row


def test_openb_censored_pods_are_counted():
    header, rows = raw_rows(OPENB_PODS_FILE)
    col = {h: j for j, h in enumerate(header)}
    end = max(int(r[col["deletion_time"]]) for r in rows)
    n = sum(1 for r in rows if r[col["pod_phase"]] == "Running" and r[col["num_gpu"]] != "0"
            and r[col["scheduled_time"]] and int(r[col["deletion_time"]]) == end)
    assert n > 0
    assert any(note.startswith(f"{n} pods were still Running") for note in openb_pods().report.notes)


# --------------------------------------------------------------------------- clusters
def test_philly_cluster():
    c = philly_cluster()
    assert c.num_machines == 552 and c.total_gpus == 2_490
    assert c.gpus_of_type() == {"P100": 321 * 2, "P40": 231 * 8}
    assert cluster_report("philly").rows_read == 552
    _, rows = raw_rows(PHILLY_MACHINES_FILE)
    assert list(c.machine_names) == [r[0] for r in rows]


def test_openb_cluster_matches_the_raw_file():
    c = openb_cluster()
    assert c.num_machines == 1_213 and c.total_gpus == 6_212
    _, rows = raw_rows(OPENB_NODES_FILE)
    per_model = collections.Counter()
    for r in rows:
        per_model[r[4]] += int(r[3])
    assert c.gpus_of_type() == dict(per_model)           # the openb model codes are canonical
    assert cluster_report("openb").filtered == {}


def test_pai_cluster_filters_cpu_machines():
    _, rows = raw_rows(PAI_MACHINES_FILE, header=False)
    cpu = sum(1 for r in rows if int(r[4]) == 0)
    c = pai_cluster()
    rep = cluster_report("pai")
    assert rep.rows_read == len(rows)
    assert rep.filtered == {"CPU-only machine (0 GPUs)": cpu} and cpu == 83
    assert c.num_machines == rep.rows_kept == len(rows) - cpu
    assert c.total_gpus == sum(int(r[4]) for r in rows)
    assert "CPU" not in c.gpu_type_names


def test_spot_cluster():
    _, rows = raw_rows(SPOT_NODES_FILE)
    c = spot_cluster()
    assert c.num_machines == len(rows) == 4_278
    assert c.total_gpus == sum(int(r[1]) for r in rows)
    assert "A100" in c.gpu_type_names and "A100-SXM4-80GB" not in c.gpu_type_names


def _groups(cluster):
    out = collections.defaultdict(list)
    for m in range(cluster.num_machines):
        key = (cluster.gpu_type_names[cluster.machine_type[m]], int(cluster.machine_gpus[m]))
        out[key].append(cluster.machine_names[m])
    return out


@pytest.mark.parametrize("fraction", [0.1, 0.25, 0.5])
def test_scale_cluster_keeps_group_proportions(fraction):
    full = openb_cluster()
    small = scale_cluster(full, fraction, "openb-small")
    assert small.name == "openb-small"
    g_full, g_small = _groups(full), _groups(small)
    assert set(g_small) == set(g_full)                   # every group survives
    for key, names in g_full.items():
        k = max(1, math.floor(len(names) * fraction + 0.5))
        assert sorted(g_small[key], key=natural_key) == sorted(names, key=natural_key)[:k]
    again = scale_cluster(full, fraction, "openb-small")
    assert again.machine_names == small.machine_names


def test_scale_cluster_edges():
    full = philly_cluster()
    assert scale_cluster(full, 1.0, "same").machine_names == full.machine_names
    tiny = scale_cluster(full, 0.001, "tiny")              # at least one machine per group
    assert tiny.num_machines == 2 and tiny.gpus_of_type() == {"P100": 2, "P40": 8}
    assert natural_key("m2") < natural_key("m10")
    for bad in (0.0, -0.5, 1.5, float("nan")):
        with pytest.raises(ValueError):
            scale_cluster(full, bad, "x")


# --------------------------------------------------------------------------- user traces
def write(tmp_path, name, text, gz=False):
    p = tmp_path / name
    data = text.encode("utf-8")
    p.write_bytes(gzip.compress(data) if gz else data)
    return p


def test_user_trace_round_trip_with_every_optional_column(tmp_path):
    p = write(tmp_path, "mine.csv",
              "job_id,submit_time,duration,num_gpus,job_type,tenant,allowed_gpu_types\n"
              "a,10,100,1,A3C,alice,\n"
              "b,15,200,4,3,bob,V100|p100\n"
              "c,15,50.5,2,,alice,A100-SXM4-80GB\n")
    w = load_workload_csv(p)
    assert w.name == "mine"
    assert w.job_ids == ("a", "b", "c")
    assert w.submit.tolist() == [0.0, 5.0, 5.0]
    assert w.duration.tolist() == [100.0, 200.0, 50.5]
    assert w.gpus.tolist() == [1, 4, 2]
    assert JOB_TYPES[w.job_type[0]] == "A3C" and w.job_type[1] == 3
    assert w.job_type[2] in DISTRIBUTED_JOB_TYPES           # assigned: multi-GPU -> distributed
    assert w.tenant.tolist() == [0, 1, 0]
    assert w.allowed_gpu_types == (None, frozenset({"V100", "P100"}), frozenset({"A100"}))
    assert w.source_row.tolist() == [1, 2, 3]
    assert w.report.rows_read == 3 and w.report.rows_kept == 3
    assert any("1 jobs had no job type" in n for n in w.report.notes)


def test_user_trace_defaults_and_gzip(tmp_path):
    p = write(tmp_path, "t.csv.gz", "Submit , RunTime,GPUs\n0,5,1\n3,6,2\n", gz=True)
    w = load_workload_csv(p, name="g")
    assert w.name == "g" and w.job_ids == ("job-1", "job-2")
    assert w.tenant.tolist() == [0, 0] and w.allowed_gpu_types is None


def test_column_mapping(tmp_path):
    p = write(tmp_path, "m.csv", "t,len,g,who,model\n1,10,1,x,HP\n2,20,2,y,Spot\n")
    w = load_workload_csv(p, columns={"submit_time": "t", "duration": "LEN", "num_gpus": "g",
                                      "tenant": "who", "job_type": None})
    assert w.duration.tolist() == [10.0, 20.0] and w.gpus.tolist() == [1, 2]
    assert w.tenant.tolist() == [0, 1]


def test_iso_datetimes(tmp_path):
    p = write(tmp_path, "iso.csv", "timestamp,duration,num_gpus\n"
                                   "2017-10-09 07:01:55,66,1\n"
                                   "2017-10-09T08:01:55,10,1\n"
                                   "2017-10-10 07:01:55,10,1\n")
    w = load_workload_csv(p)
    assert w.submit.tolist() == [0.0, 3600.0, 86400.0]
    assert any("ISO-8601" in n for n in w.report.notes)


def test_unsorted_input_is_sorted_stably(tmp_path):
    p = write(tmp_path, "u.csv", "submit,duration,gpus\n30,1,1\n10,2,1\n30,3,1\n20,4,1\n")
    w = load_workload_csv(p)
    assert w.submit.tolist() == [0.0, 10.0, 20.0, 20.0]
    assert w.duration.tolist() == [2.0, 4.0, 1.0, 3.0]
    assert w.source_row.tolist() == [2, 4, 1, 3]
    assert any("not sorted" in n for n in w.report.notes)


def test_zero_duration_filtered_and_fraction_rounded(tmp_path):
    p = write(tmp_path, "z.csv", "submit,duration,gpus\n0,0,1\n1,5,0.5\n2,0,2\n3,7,2\n")
    with pytest.warns(UserWarning, match="2 of 4 jobs have a zero duration"):
        w = load_workload_csv(p)
    assert w.num_jobs == 2 and w.report.filtered == {"zero duration": 2}
    assert w.report.rows_read == 4 and w.report.rows_kept == 2
    assert w.gpus.tolist() == [1, 2] and w.source_row.tolist() == [2, 4]
    assert any(n.startswith("1 jobs asked for a fraction") for n in w.report.notes)


def test_bom_and_blank_lines_are_accepted(tmp_path):
    p = tmp_path / "bom.csv"
    p.write_bytes("\ufeffsubmit_time,duration,num_gpus\n\n1,2,1\n\n2,3,1\n".encode("utf-8"))
    w = load_workload_csv(p)
    assert w.num_jobs == 2 and w.source_row.tolist() == [1, 2]


def test_job_types_are_deterministic_per_seed(tmp_path):
    a, b, c = assign_job_types(5000, 7), assign_job_types(5000, 7), assign_job_types(5000, 8)
    assert a.dtype == np.int64 and np.array_equal(a, b) and not np.array_equal(a, c)
    assert set(a.tolist()) == set(range(len(JOB_TYPES)))
    counts = np.bincount(a, minlength=len(JOB_TYPES))
    assert counts.min() > 5000 / 26 * 0.6 and counts.max() < 5000 / 26 * 1.4   # ~uniform
    gpus = np.where(np.arange(5000) % 3 == 0, 4, 1)
    d = assign_job_types(5000, 7, gpus=gpus)
    assert np.isin(d[gpus > 1], DISTRIBUTED_JOB_TYPES).all()
    assert np.array_equal(d[gpus == 1], a[gpus == 1])
    assert len(DISTRIBUTED_JOB_TYPES) == 19
    p = write(tmp_path, "s.csv", "submit,duration,gpus\n" + "".join(f"{i},5,1\n" for i in range(50)))
    assert np.array_equal(load_workload_csv(p, seed=1).job_type, load_workload_csv(p, seed=1).job_type)
    assert not np.array_equal(load_workload_csv(p, seed=1).job_type,
                              load_workload_csv(p, seed=2).job_type)


# --------------------------------------------------------------------------- user clusters
def test_user_cluster_with_counts_and_cpu_rows(tmp_path):
    p = write(tmp_path, "c.csv", "name,gpu_type,num_gpus,count\n"
                                 "big,V100,8,2\nsmall,T4,1,1\ncpu,CPU,0,4\nnone,P100,2,0\n")
    c, rep = read_cluster_csv(p)
    assert c.machine_names == ("big-0", "big-1", "small")
    assert c.total_gpus == 17 and c.gpus_of_type() == {"T4": 1, "V100": 16}
    assert rep.filtered == {"CPU-only machine (0 GPUs)": 1, "count 0 (no machine)": 1}
    assert rep.rows_read == 4 and rep.rows_kept == 2
    c2 = load_cluster_csv(p, name="x")
    assert c2.name == "x" and c2.machine_names == c.machine_names


def test_check_workload_fits_accepts_fitting_jobs(tmp_path):
    c = load_cluster_csv(write(tmp_path, "c.csv", "gpu_type,gpus\nV100,8\nT4,2\n"))
    w = load_workload_csv(write(tmp_path, "w.csv", "submit,duration,gpus,allowed_gpu_types\n"
                                                   "0,1,10,\n1,1,8,V100\n2,1,2,T4|K80\n"))
    check_workload_fits(w, c)
    check_workload_fits(philly_trace(), scale_cluster(philly_cluster(), 0.5, "half"))


# --------------------------------------------------------------------------- provenance
@pytest.mark.parametrize("folder", ["traces", "clusters"])
def test_shipped_files_match_the_sha256_in_sources_md(folder):
    import hashlib
    import re
    from pathlib import Path

    import cluster_env.loaders.traces as traces_module

    d = Path(traces_module.__file__).resolve().parent.parent / "data" / folder
    text = (d / "SOURCES.md").read_text(encoding="utf-8")
    listed = dict(re.findall(r"^\| `([^`]+\.gz)` \|.*\| `([0-9a-f]{64})` \|$", text, re.M))
    shipped = sorted(p.name for p in d.glob("*.gz"))
    assert sorted(listed) == shipped and shipped
    for name, sha in listed.items():
        assert hashlib.sha256(gzip.decompress((d / name).read_bytes())).hexdigest() == sha
