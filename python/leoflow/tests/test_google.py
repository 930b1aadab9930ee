"""Keyless-first resolution of a google_cloud_platform connection (ADR 0035 order)."""

from __future__ import annotations

import json

import pytest

from leoflow import LeoflowError
from leoflow.google import resolve_google_connection

KEY = {
    "type": "service_account",
    "project_id": "key-project",
    "client_email": "sa@key-project.iam.gserviceaccount.com",
    "private_key": "-----BEGIN PRIVATE KEY-----\nMIIB\n-----END PRIVATE KEY-----\n",
}


def env(extra):
    return {"AIRFLOW_CONN_GCP": json.dumps({"conn_type": "google_cloud_platform", "extra": extra})}


def test_empty_extra_is_keyless_adc():
    r = resolve_google_connection("gcp", env=env({}))
    assert (r.source, r.project_id, r.scopes, r.num_retries, r.key_info) == ("adc", None, [], 5, None)


def test_keyfile_dict_wins_over_key_path_and_secret(tmp_path):
    path = tmp_path / "k.json"
    path.write_text(json.dumps({**KEY, "project_id": "path-project"}))
    r = resolve_google_connection(
        "gcp",
        env=env({"keyfile_dict": json.dumps(KEY), "key_path": str(path), "key_secret_name": "s"}),
    )
    assert r.source == "keyfile_dict" and r.project_id == "key-project"
    r = resolve_google_connection("gcp", env=env({"keyfile_dict": "", "key_path": str(path)}))
    assert r.source == "key_path" and r.project_id == "path-project"


def test_short_names_first_legacy_as_fallback_scopes_as_list_or_string():
    r = resolve_google_connection(
        "gcp",
        env=env(
            {
                "extra__google_cloud_platform__project": "legacy",
                "scope": "https://a, https://b",
                "num_retries": "2",
            }
        ),
    )
    assert (r.project_id, r.scopes, r.num_retries) == ("legacy", ["https://a", "https://b"], 2)
    r = resolve_google_connection(
        "gcp", env=env({"project": "short", "extra__google_cloud_platform__project": "legacy", "scopes": ["x"]})
    )
    assert (r.project_id, r.scopes) == ("short", ["x"])


def test_errors_name_the_problem_and_never_the_key(tmp_path):
    with pytest.raises(LeoflowError) as e:
        resolve_google_connection("gcp", env=env({"key_path": str(tmp_path / "absent.json")}))
    assert e.value.code == "LF_SDK_GCP_KEY_PATH_UNREADABLE" and "ENOENT" in str(e.value)
    with pytest.raises(LeoflowError) as e:
        resolve_google_connection("gcp", env=env({"keyfile_dict": {**KEY, "private_key": "hunter2"}}))
    assert e.value.code == "LF_SDK_GCP_KEY_INVALID" and "hunter2" not in str(e.value)
    with pytest.raises(LeoflowError) as e:
        resolve_google_connection("gcp", env={"AIRFLOW_CONN_GCP": "postgres://h"})
    assert e.value.code == "LF_SDK_GCP_CONN_TYPE"


def test_keyfile_dict_with_literal_newline_pairs():
    one_line = {**KEY, "private_key": KEY["private_key"].replace("\n", "\\n")}
    assert "\n" not in one_line["private_key"]
    r = resolve_google_connection("gcp", env=env({"keyfile_dict": one_line}))
    assert r.key_info["private_key"] == KEY["private_key"]
