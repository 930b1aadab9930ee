"""The Google provider's own credential resolution, for test/oracle/airflow-google.test.ts.

Runs in the `oracle-google` environment (scripts/python-env.sh oracle-google: Airflow 3.3.2 with
apache-airflow-providers-google, pinned in python/requirements/oracle-google.txt). One long-lived
process answering JSON lines, as test/oracle/airflow_oracle.py does.

Request {"op": "gcp", "extra": {...}} -> what `GoogleBaseHook` makes of a google_cloud_platform
connection with that extra (delivered as AIRFLOW_CONN_* JSON, as a task would see it):
  fields       get_field(extras, name) for each field Leoflow reads
  num_retries  hook.num_retries (or the error)
  scopes       hook.scopes (or the error)
  credentials  hook.get_credentials_and_project_id(): the source the provider chose and, for a
               key (keyfile_dict or key_path), what google-auth made of it — offline. The two
               sources that need the network (Secret Manager for key_secret_name, the metadata
               server for Application Default Credentials) are stopped at the provider's own
               dispatch: the answer says which one it chose, never contacting Google.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import sys
import tempfile
import time

_home = tempfile.mkdtemp(prefix="leoflow-google-oracle-")
atexit.register(shutil.rmtree, _home, True)
os.environ.update(
    {
        "AIRFLOW_HOME": _home,
        "HOME": _home,
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{_home}/airflow.db",
        # google-auth must not look for the metadata server or a gcloud configuration.
        "NO_GCE_CHECK": "True",
        "GCE_METADATA_HOST": "127.0.0.1:9",
        "CLOUDSDK_CONFIG": os.path.join(_home, "gcloud"),
    }
)
os.environ.pop("GOOGLE_APPLICATION_CREDENTIALS", None)
_answers = os.fdopen(os.dup(1), "w", encoding="utf-8", newline="\n")
os.dup2(2, 1)
sys.stdout = sys.stderr

import logging  # noqa: E402

logging.disable(logging.CRITICAL)

# The secrets masker compiles one pattern of every secret it has seen, so over hundreds of keys
# each connection read gets slower; masking changes no value, so it is off here.
import airflow.models.connection as _core_connection  # noqa: E402
import airflow.sdk.execution_time.context as _sdk_context  # noqa: E402
import airflow.sdk.log as _sdk_log  # noqa: E402

for _module in (_core_connection, _sdk_context, _sdk_log):
    _module.mask_secret = lambda *args, **kwargs: None

from airflow.providers.google.cloud.utils import credentials_provider as cp  # noqa: E402
from airflow.providers.google.common.hooks.base_google import (  # noqa: E402
    GoogleBaseHook,
    get_field,
)

FIELDS = ("keyfile_dict", "key_path", "key_secret_name", "project", "scope", "num_retries")
CONN_ID = "oracle_gcp"


class _Network(Exception):
    """The provider chose a source that would contact Google; stopped before it does."""


def _secret(self):
    raise _Network("key_secret_name")


def _adc(self):
    raise _Network("adc")


cp._CredentialProvider._get_credentials_using_key_secret_name = _secret
cp._CredentialProvider._get_credentials_using_adc = _adc


def _error(e: BaseException) -> dict:
    return {"error": f"{type(e).__name__}: {e}"[:300]}


def _attempt(fn):
    try:
        return {"value": fn()}
    except Exception as e:
        return _error(e)


def op_gcp(req: dict) -> dict:
    extra = req["extra"]
    name = "AIRFLOW_CONN_" + CONN_ID.upper()
    os.environ[name] = json.dumps({"conn_type": "google_cloud_platform", "extra": extra})
    try:
        hook = GoogleBaseHook(gcp_conn_id=CONN_ID)
        out: dict = {
            # Copied now: the credential provider later rewrites keyfile_dict's private_key in
            # place (the connection's own extras), which must not show here.
            "fields": {
                f: _attempt(lambda f=f: json.loads(json.dumps(get_field(hook.extras, f))))
                for f in FIELDS
            },
            "num_retries": _attempt(lambda: hook.num_retries),
            "scopes": _attempt(lambda: list(hook.scopes)),
        }
        try:
            creds, project = hook.get_credentials_and_project_id()
            out["credentials"] = {
                "source": "key",
                "project": project,
                "email": getattr(creds, "service_account_email", None),
            }
        except _Network as e:
            out["credentials"] = {"source": str(e), "project": None}
        except Exception as e:
            out["credentials"] = _error(e)
        return out
    finally:
        del os.environ[name]


def op_hello(_req: dict) -> dict:
    from importlib.metadata import version

    import airflow

    return {
        "airflow": airflow.__version__,
        "task_sdk": version("apache-airflow-task-sdk"),
        "provider": version("apache-airflow-providers-google"),
        "google_auth": version("google-auth"),
    }


def main() -> None:
    for line in sys.stdin:
        if not line.strip():
            continue
        req = json.loads(line)
        started = time.monotonic()
        try:
            answer = {"gcp": op_gcp, "hello": op_hello}[req["op"]](req)
        except Exception as e:
            answer = {"oracle_error": repr(e)}
        answer["seq"] = req.get("seq")
        answer["took_ms"] = round((time.monotonic() - started) * 1000, 1)
        _answers.write(json.dumps(answer, ensure_ascii=True, default=str) + "\n")
        _answers.flush()


if __name__ == "__main__":
    main()
