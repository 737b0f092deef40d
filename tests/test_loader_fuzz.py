"""Bad input files, fuzzed: every malformed workload or cluster CSV gets a DataError that names the
file, the row and the field (never an exception from inside numpy or csv), or is handled by a
documented rule that is counted in the load report; also through ``parallel_env(workload_csv=...,
cluster_csv=...)``. Complements the hand-written cases of ``test_loader_errors.py``."""
from __future__ import annotations

import gzip
import string

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import cluster_env
from cluster_env.errors import DataError, UnknownGPUTypeError
from cluster_env.loaders import MAX_COUNT, load_cluster_csv, load_workload_csv, read_cluster_csv

FUZZ = settings(max_examples=60, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


def write(tmp_path, name, text=None, raw=None):
    p = tmp_path / name
    p.write_bytes(raw if raw is not None else text.encode("utf-8"))
    return p


def assert_names(e: DataError, path, row=None, field=None) -> None:
    """The error names the file (attribute and message), and the row and field when given."""
    msg = str(e)
    assert e.file is not None and e.file.endswith(path.name) and path.name in msg
    if row is not None:
        assert e.row == row and f"row {row}" in msg, (e.row, row, msg)
    if field is not None:
        assert e.field == field and repr(field) in msg, (e.field, field, msg)


# ----------------------------------------------------------------------------- one bad cell
WORKLOAD_ALIASES = {
    "job_id": ["job_id", "JobID", "id"],
    "submit_time": ["submit_time", "Submit", " arrival_time "],
    "duration": ["duration", "RunTime"],
    "num_gpus": ["num_gpus", "GPUs", "gpu_count"],
    "job_type": ["job_type", "Model"],
    "tenant": ["tenant", "user"],
    "allowed_gpu_types": ["allowed_gpu_types", "gpu_types"],
}
BAD_WORKLOAD_CELLS = {
    "submit_time": ["nan", "NaN", "inf", "-Infinity", "-1", "1e12", "", "x", "1_0", "0x10"],
    "duration": ["nan", "inf", "-inf", "-5", "1e10", "", "abc", "1,5"],
    "num_gpus": ["nan", "inf", "-1", "0", "1.5", "1e6", "", "x", "2.0001"],
    "job_type": ["GPT-5", "26", "-1", "1.5"],
    "allowed_gpu_types": ["Z9000", "V100|Voodoo5", "|Z9|"],
    "job_id": ["", "<duplicate>"],
}


@st.composite
def valid_workload_rows(draw):
    n = draw(st.integers(1, 6))
    return [{
        "job_id": f"j{i}",
        "submit_time": draw(st.sampled_from(["0", "5", "12.5", "300", "1e3"])),   # unsorted is fine
        "duration": draw(st.sampled_from(["1", "60", "3600.5", "2e4"])),
        "num_gpus": draw(st.sampled_from(["1", "2", "4", "0.5"])),
        "job_type": draw(st.sampled_from(["", "0", "25", "resnet-50 (batch size 64)"])),
        "tenant": draw(st.sampled_from(["", "alice", "bob"])),
        "allowed_gpu_types": draw(st.sampled_from(["", "V100", "K80|T4", "tesla v100"])),
    } for i in range(n)]


def to_csv(header: list[str], fields: list[str], rows: list[dict]) -> str:
    out = [",".join(header)]
    for r in rows:
        out.append(",".join(f'"{r[f]}"' if "," in r[f] else r[f] for f in fields))
    return "\n".join(out) + "\n"


@FUZZ
@given(rows=valid_workload_rows(), data=st.data())
def test_one_bad_workload_cell_is_named_by_row_and_field(tmp_path, rows, data):
    fields = list(WORKLOAD_ALIASES)
    header = [data.draw(st.sampled_from(WORKLOAD_ALIASES[f])) for f in fields]
    p = write(tmp_path, "jobs.csv", to_csv(header, fields, rows))
    w = load_workload_csv(p)                      # the valid table loads
    assert w.num_jobs == len(rows)
    field = data.draw(st.sampled_from(sorted(BAD_WORKLOAD_CELLS)))
    bad = data.draw(st.sampled_from(BAD_WORKLOAD_CELLS[field]))
    if bad == "<duplicate>":
        assume(len(rows) > 1)
        i = data.draw(st.integers(1, len(rows) - 1))
        bad = rows[data.draw(st.integers(0, i - 1))]["job_id"]
    else:
        i = data.draw(st.integers(0, len(rows) - 1))
    rows[i][field] = bad
    p = write(tmp_path, "jobs.csv", to_csv(header, fields, rows))
    cls = UnknownGPUTypeError if field == "allowed_gpu_types" else DataError
    with pytest.raises(cls) as err:
        load_workload_csv(p)
    assert_names(err.value, p, row=i + 1, field=header[fields.index(field)].strip())


BAD_CLUSTER_CELLS = {
    "gpu_type": ["Voodoo5", "", "CPU", "V100 x8"],
    "num_gpus": ["nan", "inf", "-1", "2.5", "1e6", "", "x", "-inf"],
    "count": ["-1", "nan", "1.5", "2e6", "", "inf", "x"],
    "machine": ["", "<duplicate>"],
}


@FUZZ
@given(n=st.integers(1, 6), data=st.data())
def test_one_bad_cluster_cell_is_named_by_row_and_field(tmp_path, n, data):
    fields = ["machine", "gpu_type", "num_gpus", "count"]
    header = [data.draw(st.sampled_from(a)) for a in
              (["machine", "node_name", "SN"], ["gpu_type", "Model"], ["num_gpus", "GPUs", "cap_gpu"], ["count"])]
    rows = [{"machine": f"n{i}", "gpu_type": data.draw(st.sampled_from(["V100", "K80", "tesla t4", "A100"])),
             "num_gpus": data.draw(st.sampled_from(["1", "2", "8"])), "count": data.draw(st.sampled_from(["1", "3"]))}
            for i in range(n)]
    p = write(tmp_path, "nodes.csv", to_csv(header, fields, rows))
    assert load_cluster_csv(p).num_machines == sum(int(r["count"]) for r in rows)
    field = data.draw(st.sampled_from(sorted(BAD_CLUSTER_CELLS)))
    bad = data.draw(st.sampled_from(BAD_CLUSTER_CELLS[field]))
    if bad == "<duplicate>":
        assume(n > 1)
        i = data.draw(st.integers(1, n - 1))
        j = data.draw(st.integers(0, i - 1))
        rows[i]["count"] = rows[j]["count"] = "1"
        bad = rows[j]["machine"]
    else:
        i = data.draw(st.integers(0, n - 1))
    rows[i][field] = bad
    p = write(tmp_path, "nodes.csv", to_csv(header, fields, rows))
    with pytest.raises(DataError) as err:
        load_cluster_csv(p)
    if field == "gpu_type":
        assert isinstance(err.value, UnknownGPUTypeError)
    assert_names(err.value, p, row=i + 1, field=header[fields.index(field)])


# ----------------------------------------------------------------------------- whole-file damage
VALID_JOBS = ("job_id,submit_time,duration,num_gpus,job_type,tenant\n"
              "a,0,100,1,0,alice\nb,10,50,2,,bob\nc,10,3600,4,LM (batch size 20),alice\n"
              "d,5,20,1,3,carol\ne,30,7,8,,bob\n")
VALID_NODES = "machine,gpu_type,num_gpus,count\nn1,V100,8,1\nn2,K80,4,2\nn3,T4,1,3\n"


def _loads_or_data_error(fn, p):
    try:
        return fn(p)
    except DataError as e:
        assert_names(e, p)
        return None


@FUZZ
@given(cut=st.integers(0, len(VALID_JOBS)), which=st.sampled_from(["jobs", "nodes"]))
def test_truncated_files_load_a_prefix_or_raise_data_error(tmp_path, cut, which):
    text = VALID_JOBS if which == "jobs" else VALID_NODES
    cut = min(cut, len(text))
    p = write(tmp_path, f"{which}.csv", text[:cut])
    fn = load_workload_csv if which == "jobs" else load_cluster_csv
    out = _loads_or_data_error(fn, p)
    if out is not None:           # a cut at a row boundary (or inside a still-valid last cell)
        full = fn(write(tmp_path, "full.csv", text))
        if which == "jobs":
            assert 1 <= out.num_jobs <= full.num_jobs
        else:
            assert 1 <= out.num_machines <= full.num_machines


_garbage = st.text(alphabet=string.printable + "\ufeff\u00e9\x00\x1f", max_size=30)


@FUZZ
@given(line=_garbage, at=st.integers(1, 5), which=st.sampled_from(["jobs", "nodes"]))
def test_a_garbage_line_anywhere_loads_or_raises_data_error(tmp_path, line, at, which):
    text = VALID_JOBS if which == "jobs" else VALID_NODES
    lines = text.splitlines(keepends=True)
    lines.insert(min(at, len(lines)), line + "\n")
    p = write(tmp_path, f"{which}.csv", "".join(lines))
    _loads_or_data_error(load_workload_csv if which == "jobs" else load_cluster_csv, p)


@FUZZ
@given(raw=st.binary(max_size=300), gz=st.booleans(), which=st.sampled_from(["jobs", "nodes"]))
def test_random_bytes_raise_data_error(tmp_path, raw, gz, which):
    """Random bytes (plain or gzip-compressed): a DataError, never another exception."""
    p = write(tmp_path, f"{which}.csv", raw=gzip.compress(raw) if gz else raw)
    _loads_or_data_error(load_workload_csv if which == "jobs" else load_cluster_csv, p)


@FUZZ
@given(sep=st.sampled_from([";", "\t", "|", " "]), nl=st.sampled_from(["\n", "\r\n", "\r"]),
       bom=st.booleans(), which=st.sampled_from(["jobs", "nodes"]))
def test_delimiters_line_endings_and_bom(tmp_path, sep, nl, bom, which):
    """Any line ending and a BOM are accepted; another delimiter is a DataError at the header."""
    text = VALID_JOBS if which == "jobs" else VALID_NODES
    fn = load_workload_csv if which == "jobs" else load_cluster_csv
    good = write(tmp_path, "good.csv", ("\ufeff" if bom else "") + text.replace("\n", nl))
    ref = fn(write(tmp_path, "ref.csv", text))
    got = fn(good)
    if which == "nodes":
        assert got.machine_names == ref.machine_names and got.gpu_type_names == ref.gpu_type_names
        np.testing.assert_array_equal(got.machine_gpus, ref.machine_gpus)
    else:
        assert got.job_ids == ref.job_ids and got.duration.tolist() == ref.duration.tolist()
    p = write(tmp_path, f"{which}.csv", ("\ufeff" if bom else "") + text.replace(",", sep).replace("\n", nl))
    with pytest.raises(DataError) as err:
        fn(p)
    assert_names(err.value, p, row=0)


# ----------------------------------------------------------------------------- cluster files
@pytest.mark.parametrize("text,row,field,words", [
    ("", None, None, "empty"),
    ("\n\n  \n", None, None, "empty"),
    ("gpu_type,num_gpus\n", 0, None, "no data rows"),
    ("gpu_type,num_gpus\nV100,8\nT4\n", 2, "num_gpus", "truncated row"),
    ("gpu_type;num_gpus\nV100;8\n", 0, None, "';'"),
    ("gpu_type,num_gpus\nV100,nan\n", 1, "num_gpus", "NaN"),
    ("gpu_type,num_gpus\nV100,8\nT4,inf\n", 2, "num_gpus", "infinite"),
    ("gpu_type,num_gpus\nV100,-8\n", 1, "num_gpus", "negative"),
    ("gpu_type,num_gpus,count\nV100,8,nan\n", 1, "count", "NaN"),
    ("gpu_type,num_gpus,count\nV100,8,1000000\nT4,1,1\n", 2, "count", "more than the limit"),
    ("gpu_type,num_gpus,count\nV100,8,1e7\n", 1, "count", "absurd"),
    ("num_gpus,machine\n8,a\n", 0, "gpu_type", "missing required column"),
    ("gpu_type,gpu_type,num_gpus\nV100,V100,8\n", 0, "gpu_type", "appears twice"),
    ("gpu_type,num_gpus\nH100,8\n", 1, "gpu_type", "unknown GPU type 'H100'"),
    ('gpu_type,num_gpus\n"V100,8\n', 1, None, "malformed"),
])
def test_bad_cluster_files(tmp_path, text, row, field, words):
    p = write(tmp_path, "nodes.csv", text)
    with pytest.raises(DataError) as err:
        load_cluster_csv(p)
    assert_names(err.value, p, row=row, field=field)
    assert words in str(err.value)


def test_cluster_bom_gzip_and_filtered_rows_are_counted(tmp_path):
    text = "\ufeffmachine,gpu_type,num_gpus,count\nc1,CPU,0,5\nn1,V100,8,0\nn2,v100,8,2\n"
    p = write(tmp_path, "nodes.csv.gz", raw=gzip.compress(text.encode("utf-8")))
    cluster, report = read_cluster_csv(p)
    assert cluster.machine_names == ("n2-0", "n2-1") and cluster.gpu_type_names == ("V100",)
    assert report.rows_read == 3 and report.rows_kept == 1
    assert report.filtered == {"CPU-only machine (0 GPUs)": 1, "count 0 (no machine)": 1}
    assert MAX_COUNT == 1_000_000


# ----------------------------------------------------------------------------- through the env
def _env(tmp_path, jobs=VALID_JOBS, nodes=VALID_NODES, **kw):
    w = write(tmp_path, "jobs.csv", jobs)
    c = write(tmp_path, "nodes.csv", nodes)
    return cluster_env.parallel_env("philly-v0", workload_csv=str(w), cluster_csv=str(c), **kw), w, c


@pytest.mark.parametrize("which,text,row,field,words", [
    ("jobs", "", None, None, "empty"),
    ("jobs", VALID_JOBS[:60], 1, "num_gpus", "truncated row: 3 fields where the header has 6"),
    ("jobs", VALID_JOBS.replace(",", ";"), 0, None, "';'"),
    ("jobs", VALID_JOBS.replace("b,10,50", "b,10,nan"), 2, "duration", "NaN"),
    ("jobs", VALID_JOBS.replace("b,10,50", "b,10,inf"), 2, "duration", "infinite"),
    ("jobs", VALID_JOBS.replace("d,5,20", "d,-5,20"), 4, "submit_time", "negative"),
    ("jobs", VALID_JOBS.replace("d,5,20", "d,5,1e15"), 4, "duration", "absurd"),
    ("jobs", VALID_JOBS.replace("e,30", "a,30"), 5, "job_id", "rows 1 and 5"),
    ("jobs", "id,submit,duration,gpus,gpu_types\na,0,1,1,\nb,0,1,1,V100\nc,0,1,1,V100|H100\n", 3,
     "gpu_types", "unknown GPU type 'H100'"),
    ("jobs", VALID_JOBS.replace("num_gpus", "workers"), 0, "num_gpus", "missing required column"),
    ("jobs", VALID_JOBS.replace("e,30,7,8", "e,30,7,20"), 5, "num_gpus", "has only 19 GPUs in all"),
    ("nodes", "", None, None, "empty"),
    ("nodes", VALID_NODES.replace("K80", "Voodoo5"), 2, "gpu_type", "unknown GPU type 'Voodoo5'"),
    ("nodes", VALID_NODES.replace("T4,1", "T4,nan"), 3, "num_gpus", "NaN"),
    ("nodes", VALID_NODES.replace("num_gpus", "gpuz"), 0, "num_gpus", "missing required column"),
    ("nodes", VALID_NODES.replace("n3,T4,1,3", "n2-1,T4,1,1"), 3, "machine",
     "duplicate machine name 'n2-1': rows 2 and 3"),
])
def test_bad_files_through_parallel_env(tmp_path, which, text, row, field, words):
    kw = {"jobs": text} if which == "jobs" else {"nodes": text}
    w = write(tmp_path, "jobs.csv", kw.get("jobs", VALID_JOBS))
    c = write(tmp_path, "nodes.csv", kw.get("nodes", VALID_NODES))
    with pytest.raises(DataError) as err:
        cluster_env.parallel_env("philly-v0", workload_csv=str(w), cluster_csv=str(c))
    assert_names(err.value, w if which == "jobs" else c, row=row, field=field)
    assert words in str(err.value)


def test_documented_rules_are_applied_and_counted_through_the_env(tmp_path):
    """BOM, unsorted submit times, zero durations and fractional GPUs load by rule, counted."""
    jobs = ("\ufeffjob_id,submit_time,duration,num_gpus\n"
            "a,100,10,1\nb,50,0,2\nc,20,30,0.5\nd,20,40,2\ne,0,0,1\n")
    env, w, c = _env(tmp_path, jobs=jobs)
    wl = env.scenario.workload()
    assert wl.job_ids == ("c", "d", "a") and wl.submit.tolist() == [0.0, 0.0, 80.0]
    assert wl.report.rows_read == 5 and wl.report.rows_kept == 3
    assert wl.report.filtered == {"zero duration": 2}
    notes = " ".join(wl.report.notes)
    assert "not sorted (1 rows" in notes and "rebased" in notes and "1 jobs asked for a fraction" in notes
    assert wl.source_row.tolist() == [3, 4, 1]
    obs, _ = env.reset(seed=0)
    while env.agents:
        obs, rewards, terms, truncs, infos = env.step(
            {a: int(np.flatnonzero(o["action_mask"])[0]) for a, o in obs.items()})
    assert infos["orderer"]["metrics"]["jobs_finished"] == 3


@settings(max_examples=25, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(jobs=st.lists(st.tuples(*[st.sampled_from(v) for v in (
           ["0", "5", "1e3", "-1", "nan", ""], ["0", "1", "60", "1e4", "-3", "inf"], ["1", "2", "8", "0", "31", "0.5", "x"],
           ["", "0", "25", "99", "LM (batch size 20)"], ["", "a", "b"], ["", "V100", "K80|T4", "H100"])]),
           min_size=1, max_size=6),
       nodes=st.lists(st.tuples(st.sampled_from(["V100", "K80", "T4", "CPU", "Voodoo5", ""]),
                                st.sampled_from(["0", "1", "4", "8", "-1", "nan"]),
                                st.sampled_from(["0", "1", "2", "1.5"])), min_size=1, max_size=4),
       seed=st.integers(0, 50))
def test_fuzzed_files_through_the_env_give_data_errors_or_finished_episodes(tmp_path, jobs, nodes, seed):
    w = write(tmp_path, "jobs.csv", "submit,duration,gpus,job_type,tenant,allowed_gpu_types\n"
              + "\n".join(",".join(j) for j in jobs) + "\n")
    c = write(tmp_path, "nodes.csv", "gpu_type,num_gpus,count\n" + "\n".join(",".join(n) for n in nodes) + "\n")
    try:
        env = cluster_env.parallel_env("philly-v0", workload_csv=str(w), cluster_csv=str(c), preemption=seed % 2 == 0)
    except DataError as e:
        assert e.file is not None and (e.file.endswith("jobs.csv") or e.file.endswith("nodes.csv"))
        assert e.file.split("/")[-1] in str(e)
        return
    rng = np.random.default_rng(seed)
    obs, _ = env.reset(seed=seed)
    steps = 0
    while env.agents and steps < 2000:
        obs, *_ = env.step({a: int(rng.choice(np.flatnonzero(o["action_mask"]))) if rng.random() > 0.5
                            or not o["action_mask"][-1] else len(o["action_mask"]) - 1 for a, o in obs.items()})
        steps += 1
    assert not env.agents and env.metrics()["jobs_finished"] == env.sim.num_jobs
