"""The Python task SDK against the environment contract the agent gives tasks (docs/agent.md)."""

from __future__ import annotations

import json
import os

import pytest

import leoflow
from leoflow import Connection, LeoflowError, get_connection, get_context, get_variable, xcom_pull, xcom_push

CTX = {
    "AIRFLOW_CTX_DAG_ID": "etl",
    "AIRFLOW_CTX_DAG_RUN_ID": "scheduled__2026-12-07T00:00:00.000Z",
    "AIRFLOW_CTX_TASK_ID": "load",
    "AIRFLOW_CTX_TRY_NUMBER": "2",
    "AIRFLOW_CTX_LOGICAL_DATE": "2026-12-07T00:00:00+00:00",
    "LEOFLOW_RUN_ID": "scheduled__2026-12-07T00:00:00.000Z",
    "LEOFLOW_RUN_TYPE": "scheduled",
    "LEOFLOW_DS": "2026-12-07",
    "LEOFLOW_DS_NODASH": "20261207",
    "LEOFLOW_TS": "2026-12-07T00:00:00+00:00",
    "LEOFLOW_TS_NODASH": "20261207T000000",
    "LEOFLOW_TS_NODASH_WITH_TZ": "20261207T000000+0000",
    "LEOFLOW_DATA_INTERVAL_START": "2026-12-06T00:00:00.000Z",
    "LEOFLOW_DATA_INTERVAL_END": "2026-12-07T00:00:00.000Z",
    "LEOFLOW_PREV_DATA_INTERVAL_START_SUCCESS": "2026-12-05T00:00:00.000Z",
    "LEOFLOW_PREV_DATA_INTERVAL_END_SUCCESS": "2026-12-06T00:00:00.000Z",
    "LEOFLOW_RUN_CONF": '{"table": "orders"}',
    "LEOFLOW_PARAMS": '{"batch": 100, "table": "orders"}',
    "LEOFLOW_MAP_INDEX": "3",
    "LEOFLOW_TASK_INSTANCE_ID": "ti-1",
}


def test_context_reads_every_name():
    c = get_context(env=CTX)
    assert (c.dag_id, c.run_id, c.task_id, c.try_number, c.map_index) == (
        "etl",
        "scheduled__2026-12-07T00:00:00.000Z",
        "load",
        2,
        3,
    )
    assert (c.ds, c.ds_nodash, c.ts, c.ts_nodash, c.ts_nodash_with_tz) == (
        "2026-12-07",
        "20261207",
        "2026-12-07T00:00:00+00:00",
        "20261207T000000",
        "20261207T000000+0000",
    )
    assert c.logical_date == "2026-12-07T00:00:00+00:00"
    assert c.prev_data_interval_start_success == "2026-12-05T00:00:00.000Z"
    assert c.params == {"batch": 100, "table": "orders"}
    assert c.dag_run.conf == {"table": "orders"} and c.dag_run.run_id == c.run_id
    assert c["ds"] == "2026-12-07"
    with pytest.raises(KeyError):
        c["nope"]


def test_context_of_a_run_without_dates_and_bad_json():
    c = get_context(env={"AIRFLOW_CTX_TRY_NUMBER": "x"})
    assert c.ds is None and c.logical_date is None and c.try_number is None
    assert c.conf == {} and c.params == {}
    with pytest.raises(LeoflowError) as e:
        get_context(env={"LEOFLOW_RUN_CONF": "[1]"})
    assert e.value.code == "LF_SDK_CONTEXT_INVALID"
    assert str(e.value) == "LEOFLOW_RUN_CONF is not a JSON object"


def test_variables(tmp_path):
    reads = tmp_path / "reads"
    env = {"AIRFLOW_VAR_PLAIN": "text", "AIRFLOW_VAR_CFG": '{"n": 1}', "LEOFLOW_SECRET_READS_FILE": str(reads)}
    assert get_variable("plain", env=env) == "text"
    assert get_variable("cfg", deserialize_json=True, env=env) == {"n": 1}
    assert get_variable("absent", "dflt", env=env) == "dflt"
    with pytest.raises(LeoflowError) as e:
        get_variable("absent", env=env)
    assert e.value.code == "LF_SDK_VARIABLE_MISSING"
    assert isinstance(e.value, KeyError)
    assert "variables: [absent]" in str(e.value)
    with pytest.raises(LeoflowError) as e:
        get_variable("plain", deserialize_json=True, env=env)
    assert e.value.code == "LF_SDK_VARIABLE_NOT_JSON" and "text" not in str(e.value)
    assert reads.read_text() == "variable plain\nvariable cfg\nvariable plain\n"
    assert oct(os.stat(reads).st_mode & 0o777) == "0o600"


def test_connection_from_uri_and_get_uri():
    env = {"AIRFLOW_CONN_DB": "postgresql://us%40er:p%40ss@DB.Example:5432/app?sslmode=require&x="}
    c = get_connection("db", env=env)
    assert (c.conn_id, c.conn_type, c.host, c.login, c.password, c.port, c.schema) == (
        "db",
        "postgres",
        "db.example",
        "us@er",
        "p@ss",
        5432,
        "app",
    )
    assert c.extra_dejson == {"sslmode": "require", "x": ""}
    assert c.get_uri() == "postgres://us%40er:p%40ss@db.example:5432/app?sslmode=require&x="
    assert "p@ss" not in repr(c)


def test_connection_json_form_and_nested_extra():
    c = get_connection(
        "gcp", env={"AIRFLOW_CONN_GCP": ' {"conn_type": "google-cloud-platform", "extra": {"a": {"b": 1}}} '}
    )
    assert c.conn_type == "google_cloud_platform" and c.host is None and c.extra_dejson == {"a": {"b": 1}}
    assert c.get_uri() == "google-cloud-platform:///?__extra__=%7B%22a%22%3A+%7B%22b%22%3A+1%7D%7D"


def test_connection_missing_and_invalid():
    with pytest.raises(LeoflowError) as e:
        get_connection("wh", env={"AIRFLOW_CONN_WH": ""})
    assert e.value.code == "LF_SDK_CONNECTION_MISSING"
    assert str(e.value).startswith('connection "wh" is not in this task\'s environment (AIRFLOW_CONN_WH is not set).')
    with pytest.raises(LeoflowError) as e:
        get_connection("bad", env={"AIRFLOW_CONN_BAD": "postgres://u:secretpw@h:99999/x"})
    assert e.value.code == "LF_CONN_URI_INVALID" and "secretpw" not in str(e.value)


def test_xcom_pull_from_env_and_dir(tmp_path):
    (tmp_path / "big.one").write_text('{"rows": 3}')
    env = {"LEOFLOW_XCOM_EXTRACT_STEP": "[1, 2]", "LEOFLOW_XCOM_DIR": str(tmp_path)}
    assert xcom_pull("extract-step", env=env) == [1, 2]
    assert xcom_pull("big.one", env=env) == {"rows": 3}
    assert xcom_pull("big.one", json_value=False, env=env) == '{"rows": 3}'
    for bad in ("missing", "../etc", ".."):
        with pytest.raises(LeoflowError) as e:
            xcom_pull(bad, env=env)
        assert e.value.code == "LF_SDK_XCOM_MISSING"
    (tmp_path / "text").write_text("not json")
    with pytest.raises(LeoflowError) as e:
        xcom_pull("text", env=env)
    assert e.value.code == "LF_SDK_XCOM_NOT_JSON"


def test_xcom_push_writes_one_last_line():
    out = []
    assert xcom_push({"a": [1, "é"]}, write=out.append) == '{"a":[1,"é"]}'
    assert out == ['\n{"a":[1,"é"]}\n']
    with pytest.raises(LeoflowError) as e:
        xcom_push({1, 2}, write=out.append)
    assert e.value.code == "LF_SDK_XCOM_NOT_SERIALIZABLE"


def test_exports():
    assert leoflow.__version__ == "0.1.0"
    assert Connection.from_uri("x", "mysql://h").host == "h"
    assert json.loads(xcom_push(None, write=lambda _t: None)) is None
