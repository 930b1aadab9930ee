"""Keyless-first Google credentials for a ``google_cloud_platform`` connection (ADR 0035).

Resolution happens here, in the task, in this order: ``keyfile_dict`` → ``key_path`` →
``key_secret_name`` (Secret Manager, read with the task's own ADC identity) → Application
Default Credentials. Short field names first; the legacy ``extra__google_cloud_platform__<name>``
only when no short name is present. ``scopes`` is a list or a comma string. Needs the optional
``google-auth`` dependency (``pip install leoflow[google]``) only when credentials are built.
"""

from __future__ import annotations

import base64
import json
import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from ._env import Env, resolve
from .errors import LeoflowError
from .secrets import get_connection

GCP_CONN_TYPE = "google_cloud_platform"
LEGACY_PREFIX = "extra__google_cloud_platform__"
DEFAULT_GOOGLE_SCOPES = ["https://www.googleapis.com/auth/cloud-platform"]
DEFAULT_NUM_RETRIES = 5
DEFAULT_SECRET_MANAGER_ENDPOINT = "https://secretmanager.googleapis.com"
SECRET_MANAGER_ENDPOINT_ENV = "LEOFLOW_SECRET_MANAGER_ENDPOINT"
_BARE_SECRET = re.compile(r"^[A-Za-z0-9_-]{1,255}$")
_SOURCES = ("keyfile_dict", "key_path", "key_secret_name")


@dataclass
class ResolvedGoogleConnection:
    conn_id: str
    #: keyfile_dict | key_path | key_secret_name | adc
    source: str
    #: the connection's project, else the key's project_id, else None (ADC detects it)
    project_id: Optional[str]
    scopes: List[str]
    num_retries: int
    #: the service-account key (never log it); None for ADC
    key_info: Optional[Dict[str, Any]] = field(default=None, repr=False)


def _field(extra: Dict[str, Any], names: Tuple[str, ...]) -> Optional[Tuple[str, Any]]:
    """The first short name present decides (null or "" = unset); legacy names only when none is."""
    for group in (names, tuple(LEGACY_PREFIX + n for n in names)):
        for key in group:
            if key in extra:
                value = extra[key]
                return None if value is None or value == "" else (key, value)
    return None


def _invalid(problem: str) -> LeoflowError:
    return LeoflowError(
        "LF_GCP_CONN_INVALID",
        f"google_cloud_platform connection: {problem}. "
        "Fix the connection (leoflow connections test <id> lists every problem).",
    )


def _check_key(key: Any, where: str) -> Dict[str, Any]:
    if not isinstance(key, dict):
        raise LeoflowError("LF_SDK_GCP_KEY_INVALID", f"{where} is not a JSON object")
    for name in ("client_email", "private_key"):
        if not isinstance(key.get(name), str) or key.get(name) == "":
            raise LeoflowError("LF_SDK_GCP_KEY_INVALID", f"{where} has no {name}: it is not a service-account key")
    if key.get("type") is not None and key.get("type") != "service_account":
        raise LeoflowError(
            "LF_SDK_GCP_KEY_INVALID", f'{where} is not a service-account key (type is not "service_account")'
        )
    if "\\n" in key["private_key"]:
        # a key pasted into a one-line form: literal \n pairs are the newlines
        key = {**key, "private_key": key["private_key"].replace("\\n", "\n")}
    if "PRIVATE KEY-----" not in key["private_key"]:
        raise LeoflowError(
            "LF_SDK_GCP_KEY_INVALID",
            f"{where}: private_key cannot be read as a PEM private key. Paste the key file's "
            "private_key unchanged (real newlines or \\n pairs, with its BEGIN/END PRIVATE KEY lines)",
        )
    return key


def _parse_key(text: str, where: str) -> Dict[str, Any]:
    try:
        key = json.loads(text)
    except ValueError:
        raise LeoflowError("LF_SDK_GCP_KEY_INVALID", f"{where} is not a JSON service-account key") from None
    return _check_key(key, where)


def _scopes(found: Optional[Tuple[str, Any]]) -> List[str]:
    if found is None:
        return []
    key, value = found
    if isinstance(value, str):
        return [s.strip() for s in value.split(",") if s.strip()]
    if isinstance(value, list) and all(isinstance(s, str) for s in value):
        return [s.strip() for s in value if s.strip()]
    raise _invalid(f"{key} must be a comma-separated string or a list of strings")


def _num_retries(found: Optional[Tuple[str, Any]]) -> int:
    if found is None:
        return DEFAULT_NUM_RETRIES
    key, value = found
    if isinstance(value, bool):
        raise _invalid(f"{key} must be a non-negative integer")
    if isinstance(value, int) and value >= 0:
        return value
    if isinstance(value, str) and re.fullmatch(r"\s*[0-9]+\s*", value):
        return int(value)
    raise _invalid(f"{key} must be a non-negative integer")


def secret_version_name(name: str) -> str:
    """``projects/p/secrets/s`` → ``…/versions/latest``; an explicit version is kept."""
    return name if re.search(r"/versions/[^/]+$", name) else f"{name}/versions/latest"


def resolve_google_connection(
    conn_id: str,
    *,
    env: Optional[Env] = None,
    scopes: Optional[List[str]] = None,
    secret_manager_endpoint: Optional[str] = None,
) -> ResolvedGoogleConnection:
    """Reads ``AIRFLOW_CONN_<ID>`` and resolves which credential source the task uses."""
    e = resolve(env)
    conn = get_connection(conn_id, env=e)
    if conn.conn_type is None or conn.conn_type.replace("-", "_") != GCP_CONN_TYPE:
        raise LeoflowError(
            "LF_SDK_GCP_CONN_TYPE",
            f'connection "{conn_id}" has no conn_type; set it to {GCP_CONN_TYPE}'
            if conn.conn_type is None
            else f'connection "{conn_id}" has conn_type "{conn.conn_type}", not {GCP_CONN_TYPE}',
        )
    if conn.extra:
        try:
            extra = json.loads(conn.extra)
        except ValueError:
            raise _invalid("invalid Extra JSON: not JSON") from None
        if not isinstance(extra, dict):
            raise _invalid("invalid Extra JSON: the text is not a JSON object")
    else:
        extra = {}
    source, found = "adc", None
    for name in _SOURCES:
        found = _field(extra, (name,))
        if found is not None:
            source = name
            break
    key: Optional[Dict[str, Any]] = None
    if source == "keyfile_dict":
        value = found[1]  # type: ignore[index]
        key = _parse_key(value, "keyfile_dict") if isinstance(value, str) else _check_key(value, "keyfile_dict")
    elif source == "key_path":
        path = found[1]  # type: ignore[index]
        if not isinstance(path, str):
            raise _invalid("key_path must be a string")
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except OSError as err:
            code = {2: "ENOENT", 13: "EACCES"}.get(err.errno or 0, "error")
            raise LeoflowError(
                "LF_SDK_GCP_KEY_PATH_UNREADABLE",
                f"key_path {path} cannot be read ({code}); "
                "is the Secret mounted into the task (executor task_secret_name)?",
            ) from None
        key = _parse_key(text, f"key_path {path}")
    # `project` as the provider reads it decides first; our `project_id` alias only fills a project
    # left unset there (as packages/core/src/connections/gcp.ts).
    project_found = _field(extra, ("project",)) or _field(extra, ("project_id",))
    if project_found is not None and not isinstance(project_found[1], str):
        raise _invalid(f"{project_found[0]} must be a string")
    key_project = key.get("project_id") if key and isinstance(key.get("project_id"), str) and key.get("project_id") else None
    retries = _num_retries(_field(extra, ("num_retries",)))
    resolved = ResolvedGoogleConnection(
        conn_id=conn_id,
        source=source,
        project_id=project_found[1] if project_found else key_project,
        scopes=scopes if scopes is not None else _scopes(_field(extra, ("scopes", "scope"))),
        num_retries=retries,
        key_info=key,
    )
    if source == "key_secret_name":
        name = found[1]  # type: ignore[index]
        if not isinstance(name, str):
            raise _invalid("key_secret_name must be a string")
        endpoint = (
            secret_manager_endpoint or e.get(SECRET_MANAGER_ENDPOINT_ENV) or DEFAULT_SECRET_MANAGER_ENDPOINT
        ).rstrip("/")
        resolved.key_info = _fetch_secret_key(name, endpoint)
        if resolved.project_id is None and resolved.key_info.get("project_id"):
            resolved.project_id = resolved.key_info["project_id"]
    return resolved


def _google_auth() -> Any:
    try:
        import google.auth  # type: ignore[import-not-found]
        import google.auth.transport.requests  # noqa: F401  # type: ignore[import-not-found]
        from google.oauth2 import service_account  # noqa: F401  # type: ignore[import-not-found]
    except ImportError:
        raise LeoflowError(
            "LF_SDK_GCP_AUTH_MISSING",
            "Google credentials need the google-auth package, which is not installed for this task's "
            "Python: install it on the task host (pip install 'leoflow[google]' or python3-google-auth)",
        ) from None
    return google.auth


def _fetch_secret_key(name: str, endpoint: str) -> Dict[str, Any]:
    google_auth = _google_auth()
    from google.auth.transport.requests import AuthorizedSession  # type: ignore[import-not-found]

    adc, adc_project = google_auth.default(scopes=DEFAULT_GOOGLE_SCOPES)
    resource = name
    if _BARE_SECRET.match(name):
        if not adc_project:
            raise LeoflowError(
                "LF_SDK_GCP_SECRET_PROJECT_MISSING",
                f'key_secret_name "{name}" is a bare secret name, which is looked up in the project of the '
                "task's Application Default Credentials — and ADC has no project. Set GOOGLE_CLOUD_PROJECT "
                "for the task, or give the full name projects/<project>/secrets/<secret>.",
            )
        resource = f"projects/{adc_project}/secrets/{name}"
    url = f"{endpoint}/v1/{secret_version_name(resource)}:access"
    res = AuthorizedSession(adc).get(url)
    if res.status_code != 200:
        raise LeoflowError(
            "LF_SDK_GCP_SECRET_FETCH_FAILED",
            f"could not read key_secret_name from Secret Manager (HTTP {res.status_code}). The task's own "
            "identity (ADC) needs roles/secretmanager.secretAccessor on the secret.",
        )
    payload = (res.json() or {}).get("payload", {}).get("data")
    if not isinstance(payload, str):
        raise LeoflowError("LF_SDK_GCP_SECRET_FETCH_FAILED", "Secret Manager answered without payload.data")
    return _parse_key(base64.b64decode(payload).decode("utf-8"), "the secret named by key_secret_name")


def get_google_credentials(
    conn_id: str, *, env: Optional[Env] = None, scopes: Optional[List[str]] = None
) -> Tuple[Any, Optional[str]]:
    """``(credentials, project_id)`` for ``conn_id``: a service-account key's, else ADC's (keyless)."""
    resolved = resolve_google_connection(conn_id, env=env, scopes=scopes)
    google_auth = _google_auth()
    use_scopes = resolved.scopes or list(DEFAULT_GOOGLE_SCOPES)
    if resolved.key_info is not None:
        from google.oauth2 import service_account  # type: ignore[import-not-found]

        creds = service_account.Credentials.from_service_account_info(resolved.key_info, scopes=use_scopes)
        return creds, resolved.project_id
    creds, adc_project = google_auth.default(scopes=use_scopes)
    return creds, resolved.project_id or adc_project


__all__ = [
    "DEFAULT_GOOGLE_SCOPES",
    "ResolvedGoogleConnection",
    "get_google_credentials",
    "resolve_google_connection",
    "secret_version_name",
]
