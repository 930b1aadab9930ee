"""Connections as a task receives them: ``AIRFLOW_CONN_<ID>``, an Airflow URI or Airflow's JSON form.

The object has the attributes of Airflow's ``Connection`` and reads a value the way a task on
Airflow 3 does (its environment backend): a value that starts with ``{`` after stripping is JSON,
anything else a URI. Parse errors never repeat the value: it may hold a password.
"""

from __future__ import annotations

import json
from typing import Any, Dict, Optional
from urllib.parse import parse_qsl, quote, unquote, urlencode, urlsplit

from .errors import LeoflowError

EXTRA_QUERY_KEY = "__extra__"

URI_FORMAT = (
    "<conn_type>://[login[:password]@]host[:port][/schema][?extra], every part percent-encoded "
    "(e.g. postgres://user:p%40ss@db.example.com:5432/app)"
)
JSON_FORMAT = (
    '{"conn_type": "...", "host": "...", "login": "...", "password": "...", "schema": "...", '
    '"port": 5432, "extra": {...}} (only conn_type is required)'
)


def _uri_error(problem: str) -> LeoflowError:
    return LeoflowError(
        "LF_CONN_URI_INVALID",
        f"invalid connection URI: {problem}; expected {URI_FORMAT}",
        {"problem": problem},
    )


def _json_error(problem: str) -> LeoflowError:
    return LeoflowError(
        "LF_CONN_JSON_INVALID",
        f"invalid connection JSON: {problem}; expected {JSON_FORMAT}",
        {"problem": problem},
    )


def normalize_conn_type(conn_type: str) -> str:
    """``postgresql`` is ``postgres``; dashes become underscores (``google-cloud-platform``)."""
    if conn_type == "postgresql":
        return "postgres"
    return conn_type.replace("-", "_")


class Connection:
    """An Airflow-compatible connection: the fields of Airflow's ``Connection``, plus ``get_uri()``."""

    def __init__(
        self,
        conn_id: str,
        conn_type: Optional[str] = None,
        host: Optional[str] = None,
        schema: Optional[str] = None,
        login: Optional[str] = None,
        password: Optional[str] = None,
        port: Optional[int] = None,
        extra: Optional[str] = None,
        description: Optional[str] = None,
    ) -> None:
        self.conn_id = conn_id
        self.conn_type = conn_type
        self.host = host
        self.schema = schema
        self.login = login
        self.password = password
        self.port = port
        self.extra = extra
        self.description = description

    def __repr__(self) -> str:  # never the password or extra: they may be secret
        return f"Connection(conn_id={self.conn_id!r}, conn_type={self.conn_type!r}, host={self.host!r})"

    @property
    def extra_dejson(self) -> Dict[str, Any]:
        """``extra`` parsed as a JSON object; ``{}`` when empty or not an object."""
        if not self.extra:
            return {}
        try:
            value = json.loads(self.extra)
        except ValueError:
            return {}
        return value if isinstance(value, dict) else {}

    def get_password(self) -> Optional[str]:
        return self.password

    def get_extra(self) -> Optional[str]:
        return self.extra

    def get_uri(self) -> str:
        """The connection as an Airflow URI, written the way Airflow's ``Connection.get_uri`` writes it."""
        uri = f"{self.conn_type.lower().replace('_', '-')}://" if self.conn_type else "//"
        host = self.host
        if host and "://" in host:
            protocol, rest = host.split("://", 1)
            if protocol != self.conn_type:
                uri += f"{protocol}://"
                host = rest
        userinfo = ""
        if self.login is not None:
            userinfo += quote(self.login, safe="")
        if self.password is not None:
            userinfo += ":" + quote(self.password, safe="")
        if userinfo:
            uri += userinfo + "@"
        where = quote(host, safe="") if host else ""
        if self.port:
            where += f"@:{self.port}" if where == "" and userinfo == "" else f":{self.port}"
        if self.schema:
            where += "/" + quote(self.schema, safe="")
        uri += where
        if self.extra:
            lead = "?" if self.schema else "/?"
            extra = self.extra_dejson
            try:
                query = urlencode(extra)
            except TypeError:
                query = ""
            if query and extra == dict(parse_qsl(query, keep_blank_values=True)):
                uri += lead + query
            else:
                uri += lead + urlencode({EXTRA_QUERY_KEY: self.extra})
        return uri

    def to_dict(self) -> Dict[str, Any]:
        return {
            "conn_id": self.conn_id,
            "conn_type": self.conn_type,
            "host": self.host,
            "schema": self.schema,
            "login": self.login,
            "password": self.password,
            "port": self.port,
            "extra": self.extra,
        }

    # ---- reading ---------------------------------------------------------------------------

    @classmethod
    def from_uri(cls, conn_id: str, uri: str) -> "Connection":
        if uri.count("://") > 2:
            raise _uri_error('it holds more than two "://"')
        with_protocol = uri.count("://") == 2
        try:
            first = urlsplit(uri)
        except ValueError:
            raise _uri_error("it is not a well-formed URI") from None
        scheme = first.scheme
        if not scheme or not uri.startswith(f"{scheme}://"):
            raise _uri_error('it does not start with a connection type followed by "://"')
        rest = uri.replace(f"{scheme}://", "" if with_protocol else "//")
        if with_protocol:
            head = rest.split("://", 1)[0]
            if "@" in head or ":" in head:
                raise _uri_error("the protocol in front of the host is malformed")
        try:
            parts = urlsplit(rest)
        except ValueError:
            raise _uri_error("it is not a well-formed URI") from None
        try:
            port = parts.port
        except ValueError:
            text = parts.netloc.rsplit("@", 1)[-1].rsplit(":", 1)[-1]
            raise _uri_error(
                "the port is out of range 0-65535" if text.isdigit() else "the port is not an integer"
            ) from None
        host = _hostname(parts)
        if host and with_protocol:
            host = f"{parts.scheme}://{host}"
        path = parts.path[1:]
        extra: Optional[str] = None
        if parts.query:
            query = dict(parse_qsl(parts.query, keep_blank_values=True))
            extra = query[EXTRA_QUERY_KEY] if EXTRA_QUERY_KEY in query else json.dumps(query)
        return cls(
            conn_id=conn_id,
            conn_type=normalize_conn_type(scheme),
            host=host,
            schema=unquote(path) if path else path,
            login=unquote(parts.username) if parts.username else parts.username,
            password=unquote(parts.password) if parts.password else parts.password,
            port=port,
            extra=extra,
        )

    @classmethod
    def from_json(cls, conn_id: str, text: str) -> "Connection":
        try:
            fields = json.loads(text)
        except ValueError:
            raise _json_error("not valid JSON") from None
        if not isinstance(fields, dict):
            raise _json_error("the JSON is not an object")
        known = {"conn_type", "host", "schema", "login", "password", "port", "extra", "description"}
        unknown = sorted(k for k in fields if k not in known)
        if unknown:
            raise _json_error(f"unknown field(s) {', '.join(unknown)}")
        extra = fields.get("extra")
        if extra and not isinstance(extra, str):
            extra = json.dumps(extra)
        conn_type = fields.get("conn_type")
        port = fields.get("port")
        if port:
            if isinstance(port, float) or isinstance(port, bool):
                raise _json_error("port must be an integer")
            try:
                port = int(port)
            except (TypeError, ValueError):
                raise _json_error("port must be an integer") from None
        else:
            port = None if port is None or port == "" else port
        return cls(
            conn_id=conn_id,
            conn_type=normalize_conn_type(conn_type) if conn_type else conn_type,
            host=fields.get("host"),
            schema=fields.get("schema"),
            login=fields.get("login"),
            password=fields.get("password"),
            port=port,
            extra=extra or None,
            description=fields.get("description"),
        )

    @classmethod
    def from_env_value(cls, conn_id: str, value: str) -> "Connection":
        text = value.strip()
        return cls.from_json(conn_id, text) if text.startswith("{") else cls.from_uri(conn_id, text)


def _hostname(parts: Any) -> str:
    """The host as written (urlsplit lower-cases it; a host holding "/" is taken from the netloc)."""
    host = unquote(parts.hostname or "")
    if "/" in host:
        host = parts.netloc
        if "@" in host:
            host = host.rsplit("@", 1)[1]
        if ":" in host:
            host = host.split(":", 1)[0]
        host = unquote(host)
    return host
