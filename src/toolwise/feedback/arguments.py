"""Canonical digest and redaction of tool arguments and free text, so executions can be grouped and
read without storing secrets.

Two nets, both cheap enough to run on every recorded execution (off the call's path, in the writer):
keys whose name says "secret" (`password`, `pwd`, `bearer`, `otp`, `card_number`, `sessionid`, …) are
masked whatever their value, and every string value is scanned for secrets by their shape (credentials
in URLs, `Bearer …`/`Basic …`, `password=…` pairs, JWTs, PEM private keys, the token formats of the
big providers, card numbers that pass the Luhn check). The shapes follow the regex plugins of Yelp's
detect-secrets, whose own scanner is too slow to run per execution (its cost and ours: the README's
"Recording executions").
"""

from __future__ import annotations

import hmac
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

DEFAULT_REDACT_PATTERN = (
    r"pass(word|wd|phrase)?|pwd|token|secret|key|auth|bearer|credential|cookie|session[_-]?id|private|otp|jwt"
    r"|ssn|card[_-]?(number|num|no)|cvc|cvv|iban"
)
REDACTED = "***"


@dataclass(frozen=True, slots=True)
class _Shape:
    """A secret's shape; its regex runs only on text holding one of its `triggers` (lower case; all
    triggers are found in one pass), so ordinary text costs one scan. A `keep` group survives (the
    part that says what the secret is)."""

    triggers: tuple[str, ...]
    pattern: re.Pattern[str]
    keep: bool = False


def _shape(triggers: tuple[str, ...], pattern: str, *, keep: bool = False, flags: int = 0) -> _Shape:
    return _Shape(triggers, re.compile(pattern, flags), keep)


_SHAPES = (
    _shape(("://",), r"(?P<keep>://[^/\s:@]*:)[^/\s@]+(?=@)", keep=True),  # user:password@host
    _shape(
        ("bearer", "basic", "token"), r"(?P<keep>\b(?:bearer|basic|token)\s+)[\w\-.~+/]{8,}=*", keep=True, flags=re.I
    ),
    _shape(
        ("pass", "pwd", "secret", "token", "key", "auth"),
        r"(?P<keep>\b(?:pass(?:word|wd)?|pwd|secret|token|api[_-]?key|access[_-]?token|client[_-]?secret|auth)"
        r"\s*[=:]\s*)[^\s&,;\"'`]+",  # a backtick ends it: it quotes a command in a message
        keep=True,
        flags=re.I,
    ),
    _shape(("eyj",), r"\beyJ[\w-]{8,}\.eyJ[\w-]{8,}\.[\w-]*"),  # JWT
    _shape(("private key",), r"-----BEGIN [A-Z ]*PRIVATE KEY-----(?:.|\n)*?(?:-----END [A-Z ]*PRIVATE KEY-----|$)"),
    _shape(("akia", "asia", "abia", "acca", "a3t"), r"\b(?:A3T[A-Z0-9]|ABIA|ACCA|AKIA|ASIA)[0-9A-Z]{16}\b"),  # AWS
    _shape(
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
        r"\b(?:gh[pousr]_[A-Za-z0-9_]{36,}|github_pat_[A-Za-z0-9_]{22,})",
    ),
    _shape(
        ("glpat-", "gldt-", "glft-", "glrt-", "glcbt-", "glptt-", "gloas-"),
        r"\bgl(?:pat|dt|ft|rt|cbt|ptt|oas)-[\w-]{20,}",
    ),  # GitLab
    _shape(("xox",), r"\bxox[abposr]-[A-Za-z0-9-]{10,}"),  # Slack
    _shape(("sk-",), r"\bsk-(?:ant-|proj-)?[\w-]{20,}"),  # OpenAI, Anthropic
    _shape(("k_live_", "k_test_"), r"\b[rsp]k_(?:live|test)_[0-9a-zA-Z]{16,}"),  # Stripe
    _shape(("aiza",), r"\bAIza[\w-]{35}"),  # Google API key
    _shape(("sg.",), r"\bSG\.[\w-]{22}\.[\w-]{43}"),  # SendGrid
    _shape(("npm_",), r"\bnpm_[A-Za-z0-9]{36}"),
    _shape(("pypi-",), r"\bpypi-AgE[\w-]{50,}"),
)
_TRIGGERS = tuple(sorted({t for s in _SHAPES for t in s.triggers}))
MEMO_TEXT_CHARS = 512  # texts up to this long are remembered with their redacted form …
MEMO_ENTRIES = 4096  # … this many at most (then forgotten all at once)
_MEMO: dict[str, str] = {}
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")  # NUL, and half of a surrogate pair (Python keeps a lone one)
_KEY_VERDICTS: dict[str, dict[str, bool]] = {}
_DIGITS = re.compile(r"\d{4}")  # a card number has runs of four digits, whatever its separators
_CARD = re.compile(r"\b\d(?:[ -]?\d){12,18}\b")


_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def canonical_json(value: object) -> str:
    """JSON with sorted keys and no whitespace: equal arguments give equal text in every process. (One
    encoder made once: `json.dumps` with options makes a new one per call, and a call's record asks.)"""
    return _CANONICAL.encode(value)


def argument_digest(arguments: Mapping[str, Any] | None, salt: bytes = b"") -> str:
    """Hex HMAC-SHA256, keyed by the database's salt, of the canonical JSON of the arguments (`{}` when
    there are none). Equal arguments group together within one database; without the salt a digest of
    a guessable secret (a PIN, a short password) could be reversed by trying every candidate."""
    # "surrogatepass": half a surrogate pair (a string cut mid-character) digests as the text it is
    text = canonical_json(arguments or {}).encode("utf-8", "surrogatepass")
    return hmac.digest(salt, text, "sha256").hex()  # OpenSSL's one-shot


# A key names a secret by a word that says so anywhere in it (`PGPASSWORD`, `accessToken`, `DB_SECRET`,
# `Proxy-Authorization`), or by a short word standing alone (`API_KEY`, `X-Auth-Token`, `BASIC_AUTH`, `DB_PASS`,
# `MYSQL_PWD`): alone, since within a word it means something else (`GIT_AUTHOR_NAME`, `KEYBOARD`,
# `PASSTHROUGH`, `OLDPWD`, the shell's `PWD`: a folder). Matched in lower case, camelCase words split by `_`.
_SECRET_KEY = re.compile(
    r"pass(?:word|wd|phrase)|secret|credential|bearer|authoriz|cookie|token(?!i[sz])|apikey|privatekey|accesskey"
    r"|(?<![a-z])(?:keys?|[a-z]*auth|pass|creds|pat|otp|jwt|private|ssn|cvc|cvv|iban)(?![a-z])"
    r"|(?<=[^a-z])pwd(?![a-z])|^pwd_|session_?id|card_?(?:number|num|no)(?![a-z])"
)
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def names_secret(key: str) -> bool:
    """Whether a key, header or flag name says its value is a secret (a token, key, password, credential,
    an authorization header), not merely a word that contains one (`GIT_AUTHOR_NAME`, `TOKENIZERS_…`)."""
    return _SECRET_KEY.search(_CAMEL.sub("_", key).lower().replace("-", "_")) is not None


def after_secret_flag(args: Sequence[str], i: int) -> bool:
    """Whether `args[i]` follows a flag whose name says it takes a secret (`--api-key KEY`)."""
    return i > 0 and args[i - 1].startswith("-") and "=" not in args[i - 1] and names_secret(args[i - 1])


def joined_secret(arg: str) -> tuple[str, str] | None:
    """(flag, value) of an argument that joins a secret to a flag naming it (`--api-key=KEY`), else None."""
    flag, joined, value = arg.partition("=")
    return (flag, value) if joined and flag.startswith("-") and names_secret(flag) else None


def _luhn(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch) * (2 if i % 2 else 1)
        total += d - 9 if d > 9 else d
    return total % 10 == 0


def _keep(match: re.Match[str]) -> str:
    return f"{match.group('keep')}{REDACTED}"


def _card(match: re.Match[str]) -> str:
    """A number that passes the Luhn check is masked; other long numbers (ids, timestamps) are kept."""
    return REDACTED if _luhn(re.sub(r"[ -]", "", match.group())) else match.group()


def redact_text(text: str) -> str:
    """`text` with every secret-shaped part masked. Short texts are remembered: the same query, path or
    timezone comes back call after call, and a dict lookup is a twentieth of a scan."""
    known = _MEMO.get(text)
    if known is not None:
        return known
    masked = masked_text(text)
    if len(text) <= MEMO_TEXT_CHARS:
        if len(_MEMO) >= MEMO_ENTRIES:
            _MEMO.clear()
        _MEMO[text] = masked
    return masked


def masked_text(text: str) -> str:
    """`redact_text`'s mask, not remembered: for text that seldom comes back (a log line, each HTTP request's
    access line), which would only push the calls' repeated texts out of the memo."""
    low = text.lower()
    masked = text
    triggered = {t for t in _TRIGGERS if t in low}  # plain substring tests beat one regex alternation
    if triggered:
        for shape in _SHAPES:
            if not triggered.isdisjoint(shape.triggers):
                masked = shape.pattern.sub(_keep if shape.keep else REDACTED, masked)
    if _DIGITS.search(masked):
        masked = _CARD.sub(_card, masked)
    return masked


def storable(text: str) -> str:
    """Text from outside (free text, argument values and keys, a client's session id) as every backend can
    store it: NUL (a downstream's binary output; PostgreSQL's text refuses it) and half a surrogate pair (a
    JavaScript client that cut a string mid-character; not UTF-8) become U+FFFD. Either made the database
    refuse the record that held it, and its dead letter too."""
    return _UNSTORABLE.sub("\ufffd", text) if _UNSTORABLE.search(text) else text


def _secret_key(pattern: re.Pattern[str], key: str) -> bool:
    """Whether a key's name says its value is secret; remembered per pattern (keys repeat endlessly)."""
    verdicts = _KEY_VERDICTS.setdefault(pattern.pattern, {})
    verdict = verdicts.get(key)
    if verdict is None:
        if len(verdicts) >= MEMO_ENTRIES:
            verdicts.clear()
        verdict = verdicts[key] = pattern.search(key) is not None
    return verdict


_LEAVES = (int, float, bool, type(None))
_SEQUENCES = (list, tuple)


def redact(value: Any, pattern: re.Pattern[str]) -> Any:
    """A copy of `value` with every mapping entry whose key matches `pattern` masked, and secrets in
    string values masked by their shape, at any depth. NaN and ±infinity (a client may send them: Python's
    JSON reads them) become "NaN", "Infinity", "-Infinity": JSON has no such numbers, and PostgreSQL
    refused the record that held one, SQLite's json() every export of the log. NUL and half a surrogate
    pair, in a value or a key, become U+FFFD (`storable`)."""
    if isinstance(value, str):
        return storable(redact_text(value))
    if isinstance(value, _LEAVES):  # the common leaves first: an ABC check is slower
        if type(value) is float and not math.isfinite(value):
            return "NaN" if math.isnan(value) else "Infinity" if value > 0 else "-Infinity"
        return value
    if isinstance(value, _SEQUENCES):
        return [redact(v, pattern) for v in value]
    if isinstance(value, Mapping):
        return {
            storable(k) if isinstance(k, str) else k: REDACTED if _secret_key(pattern, str(k)) else redact(v, pattern)
            for k, v in value.items()
        }
    return value
