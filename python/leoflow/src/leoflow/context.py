"""The run context the agent gives every task, read from the environment (docs/agent.md).

The same names and values as the JavaScript SDK's ``taskContext()`` (packages/sdk/src/context.ts),
with Airflow's keys: ``ds``, ``ts``, ``logical_date``, ``data_interval_start`` … ``params``,
``dag_run.conf``, ``run_id``.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from typing import Any, Dict, Optional

from ._env import Env, resolve
from .errors import LeoflowError


def _str(env: Env, name: str) -> Optional[str]:
    value = env.get(name)
    return None if value is None or value == "" else value


def _json_object(env: Env, name: str) -> Dict[str, Any]:
    value = _str(env, name)
    if value is None:
        return {}
    try:
        parsed = json.loads(value)
    except ValueError:
        raise LeoflowError("LF_SDK_CONTEXT_INVALID", f"{name} is not valid JSON") from None
    if not isinstance(parsed, dict):
        raise LeoflowError("LF_SDK_CONTEXT_INVALID", f"{name} is not a JSON object")
    return parsed


@dataclass(frozen=True)
class DagRun:
    """The parts of Airflow's ``dag_run`` a task can know: its id, type and conf."""

    dag_id: Optional[str]
    run_id: Optional[str]
    run_type: Optional[str]
    conf: Dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class TaskContext:
    dag_id: Optional[str]
    run_id: Optional[str]
    task_id: Optional[str]
    try_number: Optional[int]
    map_index: Optional[int]
    run_type: Optional[str]
    #: as Airflow exports AIRFLOW_CTX_LOGICAL_DATE (isoformat, ``+00:00``); None for runs without one
    logical_date: Optional[str]
    ds: Optional[str]
    ds_nodash: Optional[str]
    ts: Optional[str]
    ts_nodash: Optional[str]
    ts_nodash_with_tz: Optional[str]
    #: RFC 3339
    data_interval_start: Optional[str]
    data_interval_end: Optional[str]
    prev_data_interval_start_success: Optional[str]
    prev_data_interval_end_success: Optional[str]
    #: the run's conf (``{}`` when empty)
    conf: Dict[str, Any]
    #: resolved params: the DAG's, overlaid with the run's conf
    params: Dict[str, Any]
    dag_run: DagRun
    xcom_dir: Optional[str]
    task_instance_id: Optional[str]

    def __getitem__(self, key: str) -> Any:
        """``context["ds"]``, as in an Airflow task."""
        try:
            return getattr(self, key)
        except AttributeError:
            raise KeyError(key) from None


def get_context(env: Optional[Env] = None) -> TaskContext:
    """This attempt's run context."""
    e = resolve(env)
    try_text = _str(e, "AIRFLOW_CTX_TRY_NUMBER")
    map_text = _str(e, "LEOFLOW_MAP_INDEX")
    run_id = _str(e, "LEOFLOW_RUN_ID") or _str(e, "AIRFLOW_CTX_DAG_RUN_ID")
    conf = _json_object(e, "LEOFLOW_RUN_CONF")
    dag_id = _str(e, "AIRFLOW_CTX_DAG_ID")
    run_type = _str(e, "LEOFLOW_RUN_TYPE")
    return TaskContext(
        dag_id=dag_id,
        run_id=run_id,
        task_id=_str(e, "AIRFLOW_CTX_TASK_ID"),
        try_number=int(try_text) if try_text is not None and re.fullmatch(r"[0-9]+", try_text) else None,
        map_index=int(map_text) if map_text is not None and re.fullmatch(r"[0-9]+", map_text) else None,
        run_type=run_type,
        logical_date=_str(e, "AIRFLOW_CTX_LOGICAL_DATE"),
        ds=_str(e, "LEOFLOW_DS"),
        ds_nodash=_str(e, "LEOFLOW_DS_NODASH"),
        ts=_str(e, "LEOFLOW_TS"),
        ts_nodash=_str(e, "LEOFLOW_TS_NODASH"),
        ts_nodash_with_tz=_str(e, "LEOFLOW_TS_NODASH_WITH_TZ"),
        data_interval_start=_str(e, "LEOFLOW_DATA_INTERVAL_START"),
        data_interval_end=_str(e, "LEOFLOW_DATA_INTERVAL_END"),
        prev_data_interval_start_success=_str(e, "LEOFLOW_PREV_DATA_INTERVAL_START_SUCCESS"),
        prev_data_interval_end_success=_str(e, "LEOFLOW_PREV_DATA_INTERVAL_END_SUCCESS"),
        conf=conf,
        params=_json_object(e, "LEOFLOW_PARAMS"),
        dag_run=DagRun(dag_id=dag_id, run_id=run_id, run_type=run_type, conf=conf),
        xcom_dir=_str(e, "LEOFLOW_XCOM_DIR"),
        task_instance_id=_str(e, "LEOFLOW_TASK_INSTANCE_ID"),
    )


# ---- XCom ---------------------------------------------------------------------------------------


def xcom_env_name(upstream_task_id: str) -> str:
    """The agent's name for an upstream's XCom variable: upper-cased, anything outside A-Z0-9 → ``_``."""
    return "LEOFLOW_XCOM_" + re.sub(r"[^A-Z0-9]", "_", upstream_task_id.upper())


_MISSING = object()


def xcom_pull(task_ids: str, *, json_value: bool = True, env: Optional[Env] = None) -> Any:
    """An upstream's ``return_value``.

    ``LEOFLOW_XCOM_<UPSTREAM>`` when the agent exported it, else the file
    ``$LEOFLOW_XCOM_DIR/<upstream_task_id>`` (always written; large values are only there). The
    upstream must be in this task's ``depends_on``. With ``json_value=False`` the raw text.
    """
    e = resolve(env)
    upstream = task_ids
    name = xcom_env_name(upstream)
    raw: Any = _MISSING if name == "LEOFLOW_XCOM_DIR" else e.get(name, _MISSING)
    if raw is _MISSING:
        directory = _str(e, "LEOFLOW_XCOM_DIR")
        safe = upstream not in ("", ".", "..") and not re.search(r"[/\\\0]", upstream)
        if directory is not None and safe:
            path = os.path.join(directory, upstream)
            if os.path.exists(path):
                with open(path, encoding="utf-8") as f:
                    raw = f.read()
    if raw is _MISSING:
        raise LeoflowError(
            "LF_SDK_XCOM_MISSING",
            f'no XCom from upstream "{upstream}" ({name} is not set and $LEOFLOW_XCOM_DIR/{upstream} does not exist). '
            f"Add `depends_on: [{upstream}]` to this task in leoflow.yaml and `do_xcom_push: true` to the upstream.",
            {"upstream": upstream},
        )
    if not json_value:
        return raw
    try:
        return json.loads(raw)
    except ValueError:
        raise LeoflowError(
            "LF_SDK_XCOM_NOT_JSON",
            f'the XCom from "{upstream}" is not JSON; read it with json_value=False',
            {"upstream": upstream},
        ) from None


def xcom_push(value: Any, *, write: Any = None) -> str:
    """Pushes ``value`` as this task's XCom: one line of JSON on stdout.

    The run loop takes the task's **last** stdout line when ``do_xcom_push: true``, so call this
    last and print nothing to stdout after it (log to stderr instead).
    """
    try:
        text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError):
        raise LeoflowError(
            "LF_SDK_XCOM_NOT_SERIALIZABLE",
            "xcom_push: the value cannot be written as JSON (a set, an object, NaN or infinity)",
        ) from None
    if write is None:
        import sys

        sys.stdout.write("\n" + text + "\n")
        sys.stdout.flush()
    else:
        write("\n" + text + "\n")
    return text
