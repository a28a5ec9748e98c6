"""Secrets shown masked in what the CLI prints (`install`'s diffs): a JSON line whose key names a secret
(`GITHUB_TOKEN`, `Authorization`, `X-Api-Key`: the feedback log's key pattern) shows its value's
recognisable start only (`"ghp_***"`, `"Bearer ghp_***"`), and any other line is masked by the secret
shapes the log redacts (URLs with passwords, `Bearer …`, provider tokens). A `${VAR}` reference names
a secret without holding it, so it is shown as it is. The files written keep the values whole."""

from __future__ import annotations

import re

from toolwise.feedback.arguments import DEFAULT_REDACT_PATTERN, REDACTED, redact_text

_SECRET_KEY = re.compile(DEFAULT_REDACT_PATTERN, re.IGNORECASE)
_KEYED = re.compile(r'^(?P<lead>.*?"(?P<key>(?:[^"\\]|\\.)*)"\s*:\s*")(?P<value>(?:[^"\\]|\\.)*)(?P<tail>".*)$')
_SCHEME = re.compile(r"^(?P<scheme>(?:bearer|basic|token)\s+)?(?P<secret>.*)$", re.IGNORECASE | re.DOTALL)
_KIND = re.compile(r"^[A-Za-z]{2,6}[_-]")  # a token's kind: ghp_, sk-, xoxb-, glpat-, npm_ …
_REFERENCE = re.compile(r"^\$\{[A-Za-z_][A-Za-z0-9_]*(?::-[^}]*)?\}$")


def mask_value(value: str) -> str:
    """`value` with its secret part masked, keeping an auth scheme and a token's kind prefix."""
    match = _SCHEME.match(value)
    assert match is not None  # the pattern matches any text
    scheme, secret = match.group("scheme") or "", match.group("secret")
    if not secret or _REFERENCE.match(secret):
        return value
    kind = _KIND.match(secret)
    return f"{scheme}{kind.group() if kind else ''}{REDACTED}"


def mask_line(line: str) -> str:
    """One line of JSON text (or of a diff of it) with its secrets masked."""
    keyed = _KEYED.match(line)
    if keyed is not None and _SECRET_KEY.search(keyed.group("key")):
        return f"{keyed.group('lead')}{mask_value(keyed.group('value'))}{keyed.group('tail')}"
    return redact_text(line)


def mask_text(text: str) -> str:
    return "".join(mask_line(line) for line in text.splitlines(keepends=True))
