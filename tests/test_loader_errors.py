"""Malformed input gets a DataError naming the file, the 1-based data row and the field."""
from __future__ import annotations

import gzip
import string

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cluster_env.core.instance import Cluster
from cluster_env.errors import DataError, UnknownGPUTypeError
from cluster_env.loaders import check_workload_fits, load_cluster_csv, load_workload_csv

HEADER = "job_id,submit_time,duration,num_gpus\n"


def write(tmp_path, name, text, raw=None):
    p = tmp_path / name
    p.write_bytes(raw if raw is not None else text.encode("utf-8"))
    return p


def check(err, path, row, field, *, cls=DataError):
    """The error's type, attributes and message name file, row and field."""
    e = err.value
    assert type(e) is cls or (cls is DataError and isinstance(e, DataError))
    msg = str(e)
    assert path.name in msg and e.file is not None and e.file.endswith(path.name)
    if row is not None:
        assert e.row == row and f"row {row}" in msg
    else:
        assert e.row is None
    if field is not None:
        assert e.field == field and repr(field) in msg
    return msg


def load_bad(tmp_path, body, header=HEADER, name="bad.csv", **kw):
    p = write(tmp_path, name, header + body)
    with pytest.raises(DataError) as err:
        load_workload_csv(p, **kw)
    return p, err


# --------------------------------------------------------------------------- structure
def test_missing_column_lists_the_columns_found(tmp_path):
    p, err = load_bad(tmp_path, "a,0,5\n", header="job_id,submit_time,duration\n")
    msg = check(err, p, 0, "num_gpus")
    assert "'job_id', 'submit_time', 'duration'" in msg and "missing required column" in msg


def test_mapped_column_not_in_header(tmp_path):
    p, err = load_bad(tmp_path, "a,0,5,1\n", columns={"num_gpus": "workers"})
    check(err, p, 0, "workers")


@pytest.mark.parametrize("columns,fields", [
    ({"submit_time": "duration"}, ("submit_time", "duration")),               # with a field read by its alias
    ({"submit_time": "start", "num_gpus": "start"}, ("submit_time", "num_gpus")),  # two mapped fields
])
def test_two_fields_reading_one_column_are_refused(tmp_path, columns, fields):
    p, err = load_bad(tmp_path, "a,0,5,1,3\n", header="job_id,submit_time,duration,num_gpus,start\n",
                      columns=columns)
    msg = check(err, p, 0, next(iter(columns.values())))
    assert f"fields {fields[0]!r} and {fields[1]!r} both read column" in msg and "workload_columns=" in msg


def test_empty_file(tmp_path):
    p = write(tmp_path, "empty.csv", "")
    with pytest.raises(DataError) as err:
        load_workload_csv(p)
    assert "empty" in check(err, p, None, None)


def test_header_only(tmp_path):
    p, err = load_bad(tmp_path, "")
    assert "no data rows" in check(err, p, 0, None)


def test_truncated_row(tmp_path):
    p, err = load_bad(tmp_path, "a,0,5,1\nb,1,6,1\nc,2\n")
    assert "truncated" in check(err, p, 3, "duration")


def test_row_with_extra_fields(tmp_path):
    p, err = load_bad(tmp_path, "a,0,5,1\nb,1,6,1,9\n")
    check(err, p, 2, None)


def test_semicolon_delimiter(tmp_path):
    p, err = load_bad(tmp_path, "a;0;5;1\n", header="job_id;submit_time;duration;num_gpus\n")
    assert "';'" in check(err, p, 0, None)


def test_tab_delimiter(tmp_path):
    p, err = load_bad(tmp_path, "a\t0\t5\t1\n", header="job_id\tsubmit_time\tduration\tnum_gpus\n")
    assert "tab" in check(err, p, 0, None)


def test_bom_is_accepted(tmp_path):
    p = write(tmp_path, "bom.csv", None, raw=("\ufeff" + HEADER + "a,0,5,1\n").encode("utf-8"))
    assert load_workload_csv(p).job_ids == ("a",)


def test_unclosed_quote(tmp_path):
    p, err = load_bad(tmp_path, 'a,0,5,1\nb,"1,6,1\n')
    check(err, p, 2, None)


def test_corrupt_gzip(tmp_path):
    data = gzip.compress((HEADER + "a,0,5,1\n").encode())
    p = write(tmp_path, "bad.csv.gz", None, raw=data[:-12])
    with pytest.raises(DataError) as err:
        load_workload_csv(p)
    assert "gzip" in check(err, p, None, None)


def test_not_utf8(tmp_path):
    p = write(tmp_path, "latin.csv", None, raw=(HEADER + "caf\xe9,0,5,1\n").encode("latin-1"))
    with pytest.raises(DataError) as err:
        load_workload_csv(p)
    check(err, p, None, None)


# --------------------------------------------------------------------------- values
@pytest.mark.parametrize("body,row,field,words", [
    ("a,0,5,1\nb,1,-3,1\n", 2, "duration", "negative"),
    ("a,0,5,two\n", 1, "num_gpus", "not a number"),
    ("a,0,5,1\nb,1,,1\n", 2, "duration", "empty"),
    ("a,0,nan,1\n", 1, "duration", "NaN"),
    ("a,0,5,1\nb,x,5,1\n", 2, "submit_time", "ISO-8601"),
    ("a,2017-10-09,5,1\nb,yesterday,5,1\n", 2, "submit_time", "ISO-8601"),
    ("a,0,inf,1\n", 1, "duration", "infinite"),
    ("a,0,5,1\nb,1,-Infinity,1\n", 2, "duration", "infinite"),
    ("a,0,1e10,1\n", 1, "duration", "absurd"),
    ("a,0,5,1\nb,1,5,1000000\n", 2, "num_gpus", "absurd"),
    ("a,-5,5,1\n", 1, "submit_time", "negative"),
    ("a,0,5,1\nb,1e12,5,1\n", 2, "submit_time", "absurd"),
    ("a,0,5,1\nb,400000000,5,1\n", 2, "submit_time", "10 years"),
    ("a,0,5,1\nb,1,5,0\n", 2, "num_gpus", "0 GPUs"),
    ("a,0,5,1.5\n", 1, "num_gpus", "whole number"),
    ("a,0,5,1\nb,1,5,1_000\n", 2, "num_gpus", "not a number"),
    ("a,0,5,1\na,1,5,1\n", 2, "job_id", "rows 1 and 2"),
    ("a,0,5,1\n,1,5,1\n", 2, "job_id", "empty"),
])
def test_bad_values(tmp_path, body, row, field, words):
    p, err = load_bad(tmp_path, body)
    assert words in check(err, p, row, field)


def test_mixed_time_formats(tmp_path):
    p, err = load_bad(tmp_path, "a,2017-10-09 07:01:55,5,1\nb,100,5,1\n")
    check(err, p, 2, "submit_time")


def test_mixed_time_zones(tmp_path):
    p, err = load_bad(tmp_path, "a,2017-10-09 07:01:55,5,1\nb,2017-10-09 07:01:55+02:00,5,1\n")
    check(err, p, 2, "submit_time")


def test_errors_name_the_header_as_written(tmp_path):
    p, err = load_bad(tmp_path, "0,-1,1\n", header="Submit, RunTime ,GPUS\n")
    check(err, p, 1, "RunTime")


def test_line_number_given_when_it_differs_from_the_row(tmp_path):
    p, err = load_bad(tmp_path, "a,0,5,1\n\n\nb,1,-2,1\n")
    assert "line 5" in check(err, p, 2, "duration")


def test_unknown_job_type(tmp_path):
    p, err = load_bad(tmp_path, "a,0,5,1,ResNet-18 (batch size 16)\nb,1,5,1,GPT-5\n",
                      header=HEADER.strip() + ",job_type\n")
    assert "GPT-5" in check(err, p, 2, "job_type")


def test_job_type_index_out_of_range(tmp_path):
    p, err = load_bad(tmp_path, "a,0,5,1,26\n", header=HEADER.strip() + ",job_type\n")
    check(err, p, 1, "job_type")


def test_unknown_gpu_type_in_allowed_gpu_types(tmp_path):
    p = write(tmp_path, "w.csv", HEADER.strip() + ",allowed_gpu_types\n"
                                 "a,0,5,1,V100\nb,1,5,1,V100|Z9000\n")
    with pytest.raises(UnknownGPUTypeError) as err:
        load_workload_csv(p)
    assert "Z9000" in check(err, p, 2, "allowed_gpu_types", cls=UnknownGPUTypeError)


def test_unknown_mapping_field(tmp_path):
    p, err = load_bad(tmp_path, "a,0,5,1\n", columns={"walltime": "duration"})
    check(err, p, None, None)


# --------------------------------------------------------------------------- cluster files
def load_bad_cluster(tmp_path, text, cls=DataError, **kw):
    p = write(tmp_path, "cluster.csv", text)
    with pytest.raises(cls) as err:
        load_cluster_csv(p, **kw)
    return p, err


def test_unknown_gpu_type_in_cluster(tmp_path):
    p, err = load_bad_cluster(tmp_path, "machine,gpu_type,num_gpus\nm1,V100,8\nm2,Voodoo5,4\n",
                              cls=UnknownGPUTypeError)
    assert "Voodoo5" in check(err, p, 2, "gpu_type", cls=UnknownGPUTypeError)


@pytest.mark.parametrize("text,row,field", [
    ("machine,gpu_type,num_gpus\nm1,V100,-8\n", 1, "num_gpus"),
    ("machine,gpu_type,num_gpus\nm1,V100,8\nm2,V100,2.5\n", 2, "num_gpus"),
    ("machine,gpu_type,num_gpus\nm1,V100,8\nm1,T4,2\n", 2, "machine"),
    ("machine,gpu_type,num_gpus\nm1,V100,8\n,T4,2\n", 2, "machine"),
    ("machine,gpu_type,num_gpus,count\nm1,V100,8,2\nm1-1,T4,2,1\n", 2, "machine"),
    ("machine,gpu_type,num_gpus,count\nm1,V100,8,-1\n", 1, "count"),
    ("machine,gpu_type,num_gpus\nm1,V100,200000\n", 1, "num_gpus"),
    ("machine,gpu_type\nm1,V100\n", 0, "num_gpus"),
])
def test_bad_cluster_rows(tmp_path, text, row, field):
    p, err = load_bad_cluster(tmp_path, text)
    check(err, p, row, field)


def test_cluster_of_cpu_machines_only(tmp_path):
    p, err = load_bad_cluster(tmp_path, "machine,gpu_type,num_gpus\nc1,CPU,0\n")
    assert "CPU-only" in check(err, p, None, None)


# --------------------------------------------------------------------------- job vs cluster
def test_job_larger_than_the_cluster(tmp_path):
    c = load_cluster_csv(write(tmp_path, "c.csv", "gpu_type,num_gpus\nV100,8\nT4,2\n"))
    p = write(tmp_path, "jobs.csv", "submit,duration,gpus\n0,5,1\n1,5,10\n2,5,11\n")
    w = load_workload_csv(p)
    with pytest.raises(DataError) as err:
        check_workload_fits(w, c)
    assert "11 GPUs" in check(err, p, 3, "num_gpus")


def test_job_larger_than_its_allowed_types(tmp_path):
    c = load_cluster_csv(write(tmp_path, "c.csv", "gpu_type,num_gpus\nV100,8\nT4,2\n"))
    p = write(tmp_path, "jobs.csv", "submit,duration,gpus,allowed_gpu_types\n"
                                    "0,5,1,\n1,5,8,V100\n2,5,4,T4\n")
    with pytest.raises(DataError) as err:
        check_workload_fits(load_workload_csv(p), c)
    assert "only 2" in check(err, p, 3, "allowed_gpu_types")


def test_job_whose_allowed_types_are_absent(tmp_path):
    c = load_cluster_csv(write(tmp_path, "c.csv", "gpu_type,num_gpus\nV100,8\n"))
    p = write(tmp_path, "jobs.csv", "submit,duration,gpus,allowed_gpu_types\n"
                                    "5,5,1,\n0,5,1,A100|H800\n")
    with pytest.raises(DataError) as err:
        check_workload_fits(load_workload_csv(p), c, file="jobs.csv")
    assert "none of them" in check(err, p, 2, "allowed_gpu_types")


# --------------------------------------------------------------------------- robustness
_cell = st.text(alphabet=string.ascii_letters + string.digits + " .-+:_|\"';\t", max_size=8)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.lists(st.lists(_cell, min_size=0, max_size=6), min_size=0, max_size=5),
       header=st.sampled_from(["submit,duration,gpus", "submit,duration,gpus,job_type,tenant",
                               "submit,duration", "", "submit;duration;gpus",
                               "submit,duration,gpus,allowed_gpu_types"]))
def test_any_text_loads_or_raises_data_error(tmp_path, rows, header):
    text = header + "\n" + "\n".join(",".join(r) for r in rows)
    p = write(tmp_path, "fuzz.csv", text)
    try:
        w = load_workload_csv(p)
    except DataError as e:
        assert "fuzz.csv" in str(e)
    else:
        assert w.num_jobs >= 1 and np.all(w.gpus >= 1) and np.all(w.duration > 0)
    try:
        c = load_cluster_csv(p, columns={"gpu_type": "submit", "num_gpus": "duration"})
    except DataError as e:
        assert "fuzz.csv" in str(e)
    else:
        assert isinstance(c, Cluster)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(raw=st.binary(max_size=200))
def test_any_bytes_load_or_raise_data_error(tmp_path, raw):
    p = write(tmp_path, "bytes.csv", None, raw=raw)
    try:
        load_workload_csv(p)
    except DataError as e:
        assert "bytes.csv" in str(e)


def test_missing_columns_are_all_listed_with_the_argument_that_maps_them(tmp_path):
    p, err = load_bad(tmp_path, "a,5\n", header="job_id,duration\n")
    msg = str(err.value)
    assert "missing required columns" in msg
    for field in ("submit_time", "num_gpus"):
        assert repr(field) in msg.split("; columns found")[0]
    assert "workload_columns={'submit_time': 'your header', 'num_gpus': 'your header'}" in msg


# --------------------------------------------------------------------------- two names of one field
def _alias_cases():
    from cluster_env.loaders import cluster_csv, workload_csv

    for loader, module in (("workload", workload_csv), ("cluster", cluster_csv)):
        fields = {**module.REQUIRED_FIELDS, **module.OPTIONAL_FIELDS}
        for canonical, aliases in fields.items():
            for other in aliases[1:]:
                yield loader, canonical, aliases[0], other


ALIAS_CASES = list(_alias_cases())


@pytest.mark.parametrize("loader, canonical, first, second", ALIAS_CASES,
                         ids=[f"{c[0]}-{c[2]}-{c[3]}" for c in ALIAS_CASES])
def test_two_names_of_one_field_are_refused_naming_both_columns(tmp_path, loader, canonical, first, second):
    from cluster_env.loaders import cluster_csv, workload_csv

    module = workload_csv if loader == "workload" else cluster_csv
    # the required fields by their first names, plus both names of the field under test
    header = [aliases[0] for name, aliases in module.REQUIRED_FIELDS.items() if name != canonical]
    header += [first, second]
    p = write(tmp_path, "two.csv", ",".join(header) + "\n" + ",".join("1" for _ in header) + "\n")
    load = load_workload_csv if loader == "workload" else load_cluster_csv
    with pytest.raises(DataError) as err:
        load(p)
    msg = check(err, p, 0, second)
    assert f"columns {first!r} and {second!r} are both names of field {canonical!r}" in msg
    assert f"{loader}_columns={{{canonical!r}: {second!r}}}" in msg and "\n" not in msg


def test_a_column_mapping_chooses_between_two_names_of_one_field(tmp_path, capsys):
    from baselines.cli import main

    p = write(tmp_path, "classes.csv", "submit,duration,gpus,job_class,class\n0,10,1,hp,be\n5,10,1,be,hp\n")
    assert load_workload_csv(p, columns={"job_class": "class"}).job_class.tolist() == [0, 1]
    assert load_workload_csv(p, columns={"job_class": "job_class"}).job_class.tolist() == [1, 0]
    # On the command line: one line naming the file and both columns, exit 2, no traceback.
    assert main(["run", "--scenario", "toy-v0", "--workload-csv", str(p), "--reference-gpu", "V100",
                 "--policies", "fifo", "--seeds", "0", "--backend", "serial", "--no-plots", "--quiet",
                 "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and err[1].startswith("hint: ") and "Traceback" not in "".join(err), err
    assert f"file {p}" in err[0] and "columns 'job_class' and 'class'" in err[0]
    assert "--workload-columns job_class=class" in err[0]


# --------------------------------------------------------------------------- what is accepted, said once
@pytest.mark.parametrize("header, field, cells, accepted", [
    ("job_id,submit_time,duration,num_gpus,deadline\n", "deadline", ("-5", "0", "-0.0"),
     "a deadline is a number of seconds after submit greater than 0 (empty: no deadline)"),
    (HEADER, "num_gpus", ("-1", "0"), "a job of a user trace needs at least one GPU"),
], ids=["deadline", "num_gpus"])
def test_zero_and_negative_objective_values_get_one_message_saying_what_is_accepted(tmp_path, header, field,
                                                                                    cells, accepted):
    messages = []
    for cell in cells:
        row = "a,0,5,1," + cell if field == "deadline" else "a,0,5," + cell
        p, err = load_bad(tmp_path, "b,0,5,1" + (",10" if field == "deadline" else "") + "\n" + row + "\n",
                          header=header)
        msg = check(err, p, 2, field)
        assert accepted in msg and f"{cell!r}" in msg
        messages.append(msg.replace(repr(cell), "VALUE"))
    assert len(set(messages)) == 1, messages       # the same words for a negative value and for zero
