"""Renders templates with Apache Airflow's own Jinja environment (a DAG's template env:
sandboxed, StrictUndefined) and Airflow's macros, over a context whose date values are built as
Airflow's task runner builds them from a logical date. Reads {"runs": [...], "templates": [...]} on
stdin, prints per run one answer per template: {"ok": text} or {"error": True}. For test/oracle/templates-oracle.test.ts."""

import json
import sys
from types import SimpleNamespace

import pendulum
from airflow.sdk import DAG
from airflow.sdk.execution_time import macros

env = DAG("oracle", schedule=None).get_template_env()


def context(run):
    ld = pendulum.parse(run["logical_date"]).in_tz("UTC")
    ds = ld.strftime("%Y-%m-%d")
    ts = ld.isoformat()
    start = pendulum.parse(run["data_interval_start"]).in_tz("UTC")
    end = pendulum.parse(run["data_interval_end"]).in_tz("UTC")
    return {
        "ds": ds,
        "ds_nodash": ds.replace("-", ""),
        "ts": ts,
        "ts_nodash": ld.strftime("%Y%m%dT%H%M%S"),
        "ts_nodash_with_tz": ts.replace("-", "").replace(":", ""),
        "logical_date": ld,
        "data_interval_start": start,
        "data_interval_end": end,
        "params": run["params"],
        "run_id": run["run_id"],
        "dag_run": SimpleNamespace(conf=run["conf"], run_id=run["run_id"]),
        "macros": macros,
    }


req = json.load(sys.stdin)
answers = []
for run in req["runs"]:
    ctx = context(run)
    out = []
    for t in req["templates"]:
        try:
            out.append({"ok": env.from_string(t).render(**ctx)})
        except Exception:  # an undefined name, a bad filter input: Airflow fails the task
            out.append({"error": True})
    answers.append(out)
print(json.dumps(answers))
