"""Where the SDK reads from: the process environment unless a test passes its own mapping."""

from __future__ import annotations

import os
import re
from typing import Mapping, Optional

Env = Mapping[str, str]


def resolve(env: Optional[Env]) -> Env:
    return os.environ if env is None else env


def variable_env_name(key: str) -> str:
    return "AIRFLOW_VAR_" + key.upper()


def connection_env_name(conn_id: str) -> str:
    return "AIRFLOW_CONN_" + conn_id.upper()


_READ_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,250}$")


def note_read(env: Env, kind: str, name: str) -> None:
    """D5: appends ``<kind> <name>`` (never a value) to LEOFLOW_SECRET_READS_FILE; best-effort."""
    path = env.get("LEOFLOW_SECRET_READS_FILE")
    if not path or not _READ_NAME.match(name):
        return
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, f"{kind} {name}\n".encode())
        finally:
            os.close(fd)
    except OSError:
        pass  # not writable: the read still succeeds, it just goes unrecorded


def declare_hint(kind: str, name: str) -> str:
    noun = "connection" if kind == "connections" else "variable"
    return (
        f"The task probably did not declare it in leoflow.yaml. Add `{kind}: [{name}]` under the task "
        f"(or under the DAG, for every task), and make sure the {noun} exists in the vault."
    )
