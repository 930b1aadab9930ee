"""Reads test/sdk/contract-cases.json on stdin, answers each case with the Python SDK (one JSON
object per case: {"ok": value} or {"error": {"code", "message"}}), for sdk-contract.test.ts."""

import json
import sys

import leoflow
from leoflow import LeoflowError


def connection(c):
    return {
        "conn_id": c.conn_id,
        "conn_type": c.conn_type,
        "host": c.host,
        "login": c.login,
        "password": c.password,
        "schema": c.schema,
        "port": c.port,
        "extra": c.extra_dejson if c.extra else None,
    }


def context(env):
    c = leoflow.get_context(env=env)
    return {
        k: getattr(c, k)
        for k in (
            "dag_id", "run_id", "task_id", "try_number", "map_index", "run_type", "logical_date",
            "ds", "ds_nodash", "ts", "ts_nodash", "ts_nodash_with_tz", "data_interval_start",
            "data_interval_end", "prev_data_interval_start_success", "prev_data_interval_end_success",
            "conf", "params", "xcom_dir", "task_instance_id",
        )
    } | {"dag_run_conf": c.dag_run.conf}


def answer(case):
    env, op = case.get("env", {}), case["op"]
    if op == "context":
        return context(env)
    if op == "variable":
        return leoflow.get_variable(case["key"], env=env)
    if op == "variable_json":
        return leoflow.get_variable(case["key"], deserialize_json=True, env=env)
    if op == "connection":
        return connection(leoflow.get_connection(case["id"], env=env))
    if op == "xcom":
        return leoflow.xcom_pull(case["id"], env=env)
    if op == "xcom_raw":
        return leoflow.xcom_pull(case["id"], json_value=False, env=env)
    if op == "push":
        out = []
        leoflow.xcom_push(case["value"], write=out.append)
        return out
    raise ValueError(op)


results = []
for case in json.load(sys.stdin)["cases"]:
    try:
        results.append({"ok": answer(case)})
    except LeoflowError as e:
        results.append({"error": {"code": e.code, "message": e.message}})
print(json.dumps(results))
