"""Canonical digest and redaction of tool arguments, so executions can be grouped without storing secrets."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from typing import Any

DEFAULT_REDACT_PATTERN = r"pass(word)?|token|secret|key|auth|credential|cookie"
REDACTED = "***"


def canonical_json(value: object) -> str:
    """JSON with sorted keys and no whitespace: equal arguments give equal text in every process."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def argument_digest(arguments: Mapping[str, Any] | None) -> str:
    """SHA-256 hex digest of the canonical JSON of the arguments (`{}` when there are none)."""
    return hashlib.sha256(canonical_json(arguments or {}).encode()).hexdigest()


def redact(value: Any, pattern: re.Pattern[str]) -> Any:
    """A copy of `value` with every mapping entry whose key matches `pattern` masked, at any depth."""
    if isinstance(value, Mapping):
        return {k: REDACTED if pattern.search(str(k)) else redact(v, pattern) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact(v, pattern) for v in value]
    return value
