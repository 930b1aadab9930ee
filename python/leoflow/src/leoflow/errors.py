"""Errors the SDK raises: each carries the same stable code as the JavaScript SDK (docs/errors.md)."""

from __future__ import annotations

from typing import Any, Dict, Optional


class LeoflowError(Exception):
    """An SDK error with a stable ``LF_…`` code; the message names the fix and never a secret value."""

    def __init__(self, code: str, message: str, details: Optional[Dict[str, Any]] = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.details = dict(details or {})

    def __str__(self) -> str:
        return self.message


class ConnectionNotFound(LeoflowError, KeyError):
    """The connection is not in the task's environment (not declared, or not delivered)."""

    def __str__(self) -> str:  # KeyError would quote the message
        return self.message


class VariableNotFound(LeoflowError, KeyError):
    """The variable is not in the task's environment (not declared, or not delivered)."""

    def __str__(self) -> str:
        return self.message
