"""Leoflow's task SDK for Python.

Reads only what the agent gave the task: its environment (``AIRFLOW_CONN_*``, ``AIRFLOW_VAR_*``,
``AIRFLOW_CTX_*``, ``LEOFLOW_*``), the XCom directory, and stdout's last line for ``xcom_push``.
It makes no network call to Leoflow and never holds a Leoflow token. The same contract as the
JavaScript SDK (``@leoflow/sdk``).
"""

from .connection import Connection
from .context import DagRun, TaskContext, get_context, xcom_env_name, xcom_pull, xcom_push
from .errors import ConnectionNotFound, LeoflowError, VariableNotFound
from .secrets import get_connection, get_variable

__version__ = "0.1.0"

__all__ = [
    "Connection",
    "ConnectionNotFound",
    "DagRun",
    "LeoflowError",
    "TaskContext",
    "VariableNotFound",
    "get_connection",
    "get_context",
    "get_variable",
    "xcom_env_name",
    "xcom_pull",
    "xcom_push",
]
