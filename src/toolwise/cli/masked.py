"""Secrets shown masked in what the CLI prints (`install`'s diffs): every JSON `"key": "value"` pair whose
key names a secret (`GITHUB_TOKEN`, `Authorization`, `X-Api-Key`, `PGPASSWORD`: `names_secret`), however
many share a line, shows its value's recognisable start only (`"ghp_***"`, `"Bearer ghp_***"`), and so does
a string that follows a flag naming a secret (`"--api-key", "…"`, on one line or the next); the rest of the
text is masked by the secret shapes the log redacts (URLs with passwords, `Bearer …`, provider tokens). A
`${VAR}` reference names a secret without holding it, so it is shown as it is. The files written keep the
values whole."""

from __future__ import annotations

import re

from toolwise.config import REFERENCE
from toolwise.downstream.stderr import given_secrets
from toolwise.feedback.arguments import REDACTED, after_secret_flag, joined_secret, names_secret, redact_text

_STRING = r'"(?:[^"\\]|\\.)*"'
_PAIR = re.compile(rf'(?P<key>{_STRING})(?P<colon>\s*:\s*)"(?P<value>(?:[^"\\]|\\.)*)"')
_FLAG_VALUE = re.compile(r'(?P<flag>"-{1,2}[A-Za-z][\w-]*")(?P<comma>\s*,\s*)"(?P<value>(?:[^"\\]|\\.)*)"')
_LONE = re.compile(rf"^[-+ ]?\s*(?P<string>{_STRING})\s*,?\s*$")  # a line of a JSON array, in a diff or not
_SCHEME = re.compile(r"^(?P<scheme>(?:bearer|basic|token)\s+)?(?P<secret>.*)$", re.IGNORECASE | re.DOTALL)
_KIND = re.compile(r"^[A-Za-z]{2,6}[_-]")  # a token's kind: ghp_, sk-, xoxb-, glpat-, npm_ …


def mask_value(value: str) -> str:
    """`value` with its secret part masked, keeping an auth scheme and a token's kind prefix."""
    match = _SCHEME.match(value)
    assert match is not None  # the pattern matches any text
    scheme, secret = match.group("scheme") or "", match.group("secret")
    if not secret or REFERENCE.fullmatch(secret):
        return value
    kind = _KIND.match(secret)
    return f"{scheme}{kind.group() if kind else ''}{REDACTED}"


def _names_secret(quoted: str) -> bool:
    return names_secret(quoted[1:-1])


def _pair(match: re.Match[str]) -> str:
    if not _names_secret(match.group("key")):
        return match.group()
    return f'{match.group("key")}{match.group("colon")}"{mask_value(match.group("value"))}"'


def _flag_value(match: re.Match[str]) -> str:
    if not _names_secret(match.group("flag")):
        return match.group()
    return f'{match.group("flag")}{match.group("comma")}"{mask_value(match.group("value"))}"'


def mask_line(line: str, after_flag: bool = False) -> str:
    """One line of JSON text (or of a diff of it) with its secrets masked; `after_flag`: the line before
    was a lone flag naming a secret, so a lone string here is its value."""
    body = line.rstrip("\r\n")
    end = line[len(body) :]
    lone = _LONE.match(body)
    if after_flag and lone is not None:
        string = lone.group("string")
        start, stop = lone.span("string")
        body = f'{body[:start]}"{mask_value(string[1:-1])}"{body[stop:]}'
    body = _FLAG_VALUE.sub(_flag_value, _PAIR.sub(_pair, body))
    return redact_text(body) + end


def mask_args(args: list[str]) -> list[str]:
    """A command's arguments as printed: the value after a flag that names a secret (`--api-key VALUE`)
    or joined to it (`--api-key=VALUE`) masked, and any other by its shape."""
    masked: list[str] = []
    for i, arg in enumerate(args):
        shown = arg
        if after_secret_flag(args, i):
            shown = mask_value(arg)
        elif joined := joined_secret(arg):
            shown = f"{joined[0]}={mask_value(joined[1])}"
        masked.append(redact_text(shown))
    return masked


def literal_secrets(servers: object) -> dict[str, str]:
    """Each secret a config's servers hold as written (an `env` value or a header whose name says it is one, a
    value of `args` after a flag that says so: `given_secrets`, what the stderr relay masks), as value → its
    masked form: what doctor quotes of a failing server (its last words, its url) may hold it in a shape no
    pattern knows ("invalid API key: …"). For `unresolve`, beside `referenced_values`."""
    found: dict[str, str] = {}
    for spec in servers.values() if isinstance(servers, dict) else ():
        if not isinstance(spec, dict):
            continue
        named = {k: v for key in ("env", "headers") for k, v in _object(spec.get(key)).items() if isinstance(v, str)}
        args = spec.get("args")
        for value in given_secrets(named, [a for a in args if isinstance(a, str)] if isinstance(args, list) else []):
            if (masked := mask_value(value)) != value:  # a `${VAR}` is shown as written
                found[value] = masked
    return found


def _object(value: object) -> dict[str, object]:
    return value if isinstance(value, dict) else {}


def unresolve(text: str, references: dict[str, str]) -> str:
    """`text` with each value a `${VAR}` reference resolved to shown as that reference (the longest
    first: one value may hold another); `references` is config.referenced_values'."""
    for value in sorted(references, key=len, reverse=True):
        text = text.replace(value, references[value])
    return text


def mask_text(text: str) -> str:
    masked: list[str] = []
    after_flag = False
    for line in text.splitlines(keepends=True):
        masked.append(mask_line(line, after_flag))
        lone = _LONE.match(line.rstrip("\r\n"))
        after_flag = lone is not None and lone.group("string").startswith('"-') and _names_secret(lone.group("string"))
    return "".join(masked)
