"""Writes packages/core/test/scheduling/retry-backoff.vectors.json: the delays Airflow itself
computes for a retry (TaskInstance.next_retry_datetime of apache-airflow-core, called on a stand-in
task instance), for Leoflow's retryBackoffSeconds to reproduce exactly.

    <airflow venv>/bin/python test/oracle/retry_backoff_vectors.py > vectors.json

Run it with the oracle environment (scripts/python-env.sh oracle, apache-airflow-core 3.3.2).
"""
import json
import logging
import random
import sys
from datetime import timedelta
from types import SimpleNamespace

import pendulum
from airflow.models.taskinstance import TaskInstance

logging.disable(logging.CRITICAL)
END = pendulum.datetime(2026, 3, 1, 12, 0, 0, tz="UTC")
rng = random.Random(41)
cases = []
for dag, task in [("etl", "load"), ("sales_daily", "extract.pull"), ("map_files", "process")]:
    for logical in [
        pendulum.datetime(2026, 1, 1, tz="UTC"),
        pendulum.datetime(2026, 1, 1, 6, 30, 0, 123000, tz="UTC"),
        None,
    ]:
        for delay in [0, 1, 5, 60, 300]:
            for mult in [2.0, 1.5, 3, 0, 1]:
                for try_number in [1, 2, 3, 5, 10]:
                    for max_delay in [None, 600]:
                        cases.append((dag, task, logical, delay, mult, try_number, max_delay))
cases = rng.sample(cases, 400)
# the caps: past max_task_retry_delay (24 h), and a multiplier power that overflows a double
cases.append(("etl", "load", pendulum.datetime(2026, 1, 1, tz="UTC"), 300, 2.0, 40, None))
cases.append(("etl", "load", pendulum.datetime(2026, 1, 1, tz="UTC"), 1, 2.0, 1100, None))
out = []
for dag, task, logical, delay, mult, try_number, max_delay in cases:
    ti = SimpleNamespace(
        retry_delay_override=None,
        dag_id=dag,
        task_id=task,
        logical_date=logical,
        try_number=try_number,
        end_date=END,
        log=logging.getLogger("vectors"),
        task=SimpleNamespace(
            retry_delay=timedelta(seconds=delay),
            retry_exponential_backoff=mult,
            max_retry_delay=timedelta(seconds=max_delay) if max_delay else None,
        ),
    )
    seconds = (TaskInstance.next_retry_datetime(ti) - END).total_seconds()
    out.append(
        {
            "dag_id": dag,
            "task_id": task,
            "logical_date_ms": None if logical is None else int(logical.timestamp() * 1000),
            "retry_delay_seconds": delay,
            "multiplier": mult,
            "try_number": try_number,
            "max_retry_delay_seconds": max_delay,
            "delay_seconds": seconds,
        }
    )
json.dump(out, sys.stdout, indent=0)
sys.stdout.write("\n")
