"""Variables and Connections as the agent delivered them: only what the task declared (and was granted)."""

from __future__ import annotations

import json
import sys
from typing import Any, Optional

from ._env import Env, connection_env_name, declare_hint, note_read, resolve, variable_env_name
from .connection import Connection
from .errors import ConnectionNotFound, LeoflowError, VariableNotFound

_NO_DEFAULT = object()


def get_variable(
    key: str,
    default: Any = _NO_DEFAULT,
    *,
    deserialize_json: bool = False,
    env: Optional[Env] = None,
) -> Any:
    """``AIRFLOW_VAR_<KEY>``: the text, or its JSON value with ``deserialize_json=True``."""
    e = resolve(env)
    name = variable_env_name(key)
    value = e.get(name)
    if value is None:
        if default is not _NO_DEFAULT:
            return default
        raise VariableNotFound(
            "LF_SDK_VARIABLE_MISSING",
            f'variable "{key}" is not in this task\'s environment ({name} is not set). '
            + declare_hint("variables", key),
            {"key": key, "env_name": name},
        )
    note_read(e, "variable", key)
    if not deserialize_json:
        return value
    try:
        return json.loads(value)
    except ValueError:
        # Never echo the value: a variable may hold a secret.
        raise LeoflowError(
            "LF_SDK_VARIABLE_NOT_JSON",
            f'variable "{key}" is not valid JSON; read it without deserialize_json=True or fix its value',
            {"key": key},
        ) from None


def get_connection(conn_id: str, *, env: Optional[Env] = None) -> Connection:
    """``AIRFLOW_CONN_<ID>`` in either Airflow form (a URI, or JSON when it starts with ``{``)."""
    e = resolve(env)
    name = connection_env_name(conn_id)
    value = e.get(name)
    if value is None or value == "":
        raise ConnectionNotFound(
            "LF_SDK_CONNECTION_MISSING",
            f'connection "{conn_id}" is not in this task\'s environment ({name} is not set). '
            + declare_hint("connections", conn_id),
            {"conn_id": conn_id, "env_name": name},
        )
    conn = Connection.from_env_value(conn_id, value)
    if conn.conn_type is None:
        print(
            f'connection "{conn_id}": the connection JSON has no conn_type; Airflow accepts that (the type is unset), '
            'but hooks and Leoflow\'s vault need one (e.g. "conn_type": "postgres")',
            file=sys.stderr,
        )
    note_read(e, "connection", conn_id)
    return conn
