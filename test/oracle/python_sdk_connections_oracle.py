"""Reads connection values (URIs and JSON forms) on stdin; for each prints what the Python task
SDK (leoflow, on PYTHONPATH) and Apache Airflow's task SDK make of it: the attributes and
get_uri(), or that it failed. For test/oracle/python-sdk-connections.test.ts."""

import json
import sys

from airflow.sdk import Connection as AirflowConnection

from leoflow import Connection, LeoflowError


def fields(c):
    return {k: getattr(c, k) for k in ("conn_type", "host", "schema", "login", "password", "port", "extra")}


answer = sys.stdout
sys.stdout = sys.stderr  # Airflow may log to stdout; only the answer goes there
out = []
for value in json.load(sys.stdin):
    text = value.strip()
    row = {}
    try:
        ours = Connection.from_env_value("c", value)
        row["leoflow"] = {"fields": fields(ours), "uri": ours.get_uri()}
    except LeoflowError as e:
        row["leoflow"] = {"error": e.code}
    try:
        theirs = (
            AirflowConnection.from_json(text, conn_id="c")
            if text.startswith("{")
            else AirflowConnection.from_uri(text, conn_id="c")
        )
        row["airflow"] = {"fields": fields(theirs), "uri": theirs.get_uri()}
    except Exception:
        row["airflow"] = {"error": True}
    out.append(row)
answer.write(json.dumps(out) + "\n")
