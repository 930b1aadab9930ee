"""Apache Airflow's own answers for Leoflow's differential tests (test/oracle/*.test.ts).

One long-lived process: a JSON request per line on stdin, a JSON answer per line on stdout,
so thousands of cases cost seconds rather than an interpreter start each. Everything Airflow
prints or logs goes to stderr; stdout carries answers only.

Runs in the `oracle` environment (scripts/python-env.sh oracle: apache-airflow-core and
apache-airflow-task-sdk, pinned in python/requirements/oracle.txt). It needs no network and
no running Airflow: AIRFLOW_HOME is a temporary directory made here (removed at exit), with a
SQLite file created from Airflow's ORM the first time a variables request needs a database.

Requests ({"op": ..., ...}) and answers:
  hello                       -> versions
  uri {uri}                   -> how each Connection class reads a URI
  conn {conn}                 -> how each class writes a connection (get_uri, as_json, export)
  json {text}                 -> how each class reads the JSON form (from_json)
  env {kind, id, name, value} -> whether Airflow's environment backend finds `value` when it is
                                 set under `name`; for connections, what a task gets from it
  conn_ids {ids}              -> sanitize_conn_id of each id
  var_import {text}           -> what `airflow variables import` stores for a file
  var_export {vars}           -> the file `airflow variables export` writes for stored rows
  conn_import {format, text}  -> what `airflow connections import` reads from a file
Every side that raises answers {"error": "<ExceptionType>: <message>"}.
"""

from __future__ import annotations

import atexit
import io
import json
import os
import shutil
import sys
import tempfile
import unicodedata

_home = tempfile.mkdtemp(prefix="leoflow-airflow-oracle-")
atexit.register(shutil.rmtree, _home, True)
os.environ.update(
    {
        "AIRFLOW_HOME": _home,
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__DATABASE__LOAD_DEFAULT_CONNECTIONS": "False",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{_home}/airflow.db",
        "AIRFLOW__CORE__UNIT_TEST_MODE": "False",
    }
)
# Only this process's answers go to the real stdout.
_answers = os.fdopen(os.dup(1), "w", encoding="utf-8", newline="\n")
os.dup2(2, 1)
sys.stdout = sys.stderr

import logging  # noqa: E402

logging.disable(logging.CRITICAL)

from argparse import Namespace  # noqa: E402

import airflow  # noqa: E402
from airflow.models.connection import Connection as CoreConnection  # noqa: E402
from airflow.models.connection import sanitize_conn_id  # noqa: E402
from airflow.sdk import Connection as SdkConnection  # noqa: E402
from airflow.secrets.environment_variables import EnvironmentVariablesBackend  # noqa: E402

# Both Connection classes register every password and extra with the secrets masker, whose
# pattern grows with each one: over thousands of cases that costs more than everything else.
# Masking changes no value, so the oracle turns it off.
import airflow.models.connection as _core_connection  # noqa: E402
import airflow.sdk.log as _sdk_log  # noqa: E402

_core_connection.mask_secret = lambda *args, **kwargs: None
_sdk_log.mask_secret = lambda *args, **kwargs: None

CONN_ID = "oracle_conn"
FIELDS = ("conn_type", "host", "login", "password", "schema", "port", "extra")


def _error(e: BaseException) -> dict:
    return {"error": f"{type(e).__name__}: {e}"[:300]}


def _fields(c) -> dict:
    out = {f: getattr(c, f) for f in FIELDS}
    out["description"] = c.description
    return out


def _attempt(fn):
    try:
        return fn()
    except Exception as e:  # every exception is an answer, never a crash
        return _error(e)


def _core_from_uri(uri: str):
    return CoreConnection(conn_id=CONN_ID, uri=uri)


def _sdk_from_uri(uri: str):
    return SdkConnection.from_uri(uri, conn_id=CONN_ID)


READERS = {"core": _core_from_uri, "sdk": _sdk_from_uri}


def _written(c) -> dict:
    """What one connection object writes, and how each class reads its URI back."""
    out: dict = {"fields": _fields(c)}
    uri = _attempt(c.get_uri)
    out["get_uri"] = uri
    out["as_json"] = _attempt(c.as_json)
    if isinstance(uri, str):
        out["reread"] = {name: _attempt(lambda r=read: _fields(r(uri))) for name, read in READERS.items()}
    return out


def op_hello(_req: dict) -> dict:
    from importlib.metadata import version

    return {
        "airflow": airflow.__version__,
        "core": version("apache-airflow-core"),
        "task_sdk": version("apache-airflow-task-sdk"),
        "python": sys.version.split()[0],
    }


def op_uri(req: dict) -> dict:
    uri = req["uri"]
    return {name: _attempt(lambda r=read: _written(r(uri))) for name, read in READERS.items()}


def _kwargs(conn: dict) -> dict:
    kw = {f: conn.get(f) for f in ("conn_type", "host", "login", "password", "schema", "port")}
    kw["description"] = conn.get("description")
    # Leoflow holds extra as an object; Airflow stores json.dumps of it (what its API, CLI and
    # Python callers store for a dict).
    extra = conn.get("extra")
    kw["extra"] = None if extra is None else json.dumps(extra)
    return kw


def op_conn(req: dict) -> dict:
    from airflow.cli.commands.connection_command import _format_connections

    kw = _kwargs(req["conn"])
    out: dict = {}
    core = _attempt(lambda: CoreConnection(conn_id=CONN_ID, **kw))
    out["core"] = core if isinstance(core, dict) else _written(core)
    sdk = _attempt(lambda: SdkConnection(conn_id=CONN_ID, **kw))
    out["sdk"] = sdk if isinstance(sdk, dict) else _written(sdk)
    if not isinstance(core, dict):
        out["export"] = {
            "json": _attempt(lambda: _format_connections([core], ".json", "json")),
            "env_uri": _attempt(lambda: _format_connections([core], ".env", "uri")),
            "env_json": _attempt(lambda: _format_connections([core], ".env", "json")),
        }
    return out


def op_json(req: dict) -> dict:
    text = req["text"]
    return {
        "core": _attempt(lambda: _written(CoreConnection.from_json(text, conn_id=CONN_ID))),
        "sdk": _attempt(lambda: _written(SdkConnection.from_json(text, conn_id=CONN_ID))),
    }


def op_env(req: dict) -> dict:
    kind, key, name, value = req["kind"], req["id"], req["name"], req["value"]
    prefix = "AIRFLOW_CONN_" if kind == "conn" else "AIRFLOW_VAR_"
    out: dict = {"airflow_name": _attempt(lambda: prefix + key.upper())}
    try:
        os.environ[name] = value
    except Exception as e:
        out["set"] = _error(e)
        return out
    try:
        backend = EnvironmentVariablesBackend()
        if kind == "conn":
            out["found"] = backend.get_conn_value(key)
            # What a task gets: the worker's backend reads with the Task SDK's class.
            backend._set_connection_class(SdkConnection)
            task = _attempt(lambda: backend.get_connection(key))
            out["task"] = task if isinstance(task, dict) or task is None else _fields(task)
        else:
            out["found"] = backend.get_variable(key)
    finally:
        del os.environ[name]
    return out


def op_conn_ids(req: dict) -> dict:
    return {"sanitized": [sanitize_conn_id(i) for i in req["ids"]]}


_db_ready = False


def _db():
    global _db_ready
    from airflow import settings

    if not _db_ready:
        from airflow.utils import db

        db.initdb()
        _db_ready = True
    return settings


def _clear_variables(session) -> None:
    from sqlalchemy import delete

    from airflow.models.variable import Variable

    session.execute(delete(Variable))
    session.commit()


def _stored_variables() -> list:
    from sqlalchemy import select

    from airflow.models.variable import Variable

    settings = _db()
    with settings.Session() as s:
        rows = s.scalars(select(Variable).order_by(Variable.key))
        return [{"key": v.key, "value": v.val, "description": v.description} for v in rows]


def op_var_import(req: dict) -> dict:
    from airflow.cli.commands import variable_command

    settings = _db()
    with settings.Session() as s:
        _clear_variables(s)
    path = os.path.join(_home, "variables.json")
    with open(path, "w", encoding="utf-8") as f:
        f.write(req["text"])
    printed = io.StringIO()
    saved, sys.stdout = sys.stdout, printed
    try:
        # Without the CLI's `action_cli` wrapper, which checks the database's migrations and logs
        # the command on every call (most of the time a case costs); the import itself is the same.
        _unwrapped(variable_command.variables_import)(
            Namespace(file=path, action_on_existing_key="overwrite", verbose=False)
        )
    except SystemExit as e:
        return {"error": f"SystemExit: {e}"[:300]}
    except Exception as e:
        return _error(e)
    finally:
        sys.stdout = saved
    failed = "failed to be updated" in printed.getvalue()
    return {"stored": _stored_variables(), "failed": failed}


def _unwrapped(cli_command):
    from airflow.utils import cli as cli_utils

    wrapped = getattr(cli_command, "__wrapped__", None)
    if wrapped is None or cli_command.__code__ is not cli_utils.action_cli(lambda args: None).__code__:
        return cli_command
    return wrapped


class _ExportFile(io.StringIO):
    name = "variables.json"

    def __exit__(self, *exc):  # variables_export closes the file; keep the text readable
        return False


def op_var_export(req: dict) -> dict:
    from airflow.cli.commands import variable_command
    from airflow.models.variable import Variable

    settings = _db()
    with settings.Session() as s:
        _clear_variables(s)
        for v in req["vars"]:
            s.add(Variable(key=v["key"], val=v["value"], description=v.get("description")))
        s.commit()
    f = _ExportFile()
    try:
        variable_command.variables_export(Namespace(file=f))
    except Exception as e:
        return _error(e)
    return {"text": f.getvalue(), "stored": _stored_variables()}


def op_conn_import(req: dict) -> dict:
    from airflow.secrets.local_filesystem import load_connections_dict

    path = os.path.join(_home, f"connections.{req['format']}")
    with open(path, "w", encoding="utf-8") as f:
        f.write(req["text"])
    try:
        conns = load_connections_dict(path)
    except Exception as e:
        return _error(e)
    return {"connections": {k: _fields(c) for k, c in conns.items()}}


OPS = {name[3:]: fn for name, fn in globals().items() if name.startswith("op_")}


def _strings(v):
    if isinstance(v, str):
        yield v
    elif isinstance(v, dict):
        for k, x in v.items():
            yield k
            yield from _strings(x)
    elif isinstance(v, list):
        for x in v:
            yield from _strings(x)


def main() -> None:
    for line in sys.stdin:
        if not line.strip():
            continue
        req = json.loads(line)
        try:
            answer = OPS[req["op"]](req)
        except Exception as e:  # a bug in this script, reported rather than fatal
            answer = {"oracle_error": repr(e)}
        # Characters this Python's Unicode database (14.0 in CPython 3.11) does not know: Node's
        # may (case mappings differ there), so the tests can name that cause.
        answer["py_unassigned"] = sorted(
            {c for s in _strings(req) for c in s if unicodedata.category(c) == "Cn"}
        )
        answer["seq"] = req.get("seq")
        # ensure_ascii keeps lone surrogates and every non-ASCII character exact on the pipe.
        _answers.write(json.dumps(answer, ensure_ascii=True, allow_nan=True) + "\n")
        _answers.flush()


if __name__ == "__main__":
    main()
