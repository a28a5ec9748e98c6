"""Where the HTTP token comes from, and which Host values each bind address answers to."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
from pydantic import SecretStr
from starlette.responses import Response
from starlette.types import Message, Receive, Scope, Send

from toolwise.config import ConfigError, Settings
from toolwise.server.auth import BearerAuth, http_access, load_tokens

TOKEN = "0123456789abcdef-token"


def test_the_token_comes_from_the_environment_or_a_file_never_both(tmp_path: Path) -> None:
    file = tmp_path / "token"
    file.write_text(TOKEN + "\n")
    assert load_tokens(Settings(http_token_file=file)) == (TOKEN,)
    assert load_tokens(Settings(http_token=SecretStr(TOKEN))) == (TOKEN,)
    assert load_tokens(Settings()) is None
    file.write_text(f"# alice\n{TOKEN}\n\n# bob\n{TOKEN}-bob\n")  # one a client
    assert load_tokens(Settings(http_token_file=file)) == (TOKEN, f"{TOKEN}-bob")
    with pytest.raises(ConfigError, match="not both"):
        load_tokens(Settings(http_token=SecretStr(TOKEN), http_token_file=file))
    file.write_text("short")
    with pytest.raises(ConfigError, match="at least 16 characters"):
        load_tokens(Settings(http_token_file=file))
    with pytest.raises(ConfigError, match="No such file"):
        load_tokens(Settings(http_token_file=tmp_path / "missing"))


def test_every_bind_address_checks_hosts_and_a_public_one_needs_a_token() -> None:
    for host in ("127.0.0.2", "0.0.0.0", "192.0.2.7", "::"):
        allowed = http_access(host, Settings(http_token=SecretStr(TOKEN), http_allowed_hosts=["mcp.example"])).security
        assert allowed.enable_dns_rebinding_protection
        assert "evil.example" not in allowed.allowed_hosts and "mcp.example" in allowed.allowed_hosts
    assert "192.0.2.7:*" in http_access("192.0.2.7", Settings(http_token=SecretStr(TOKEN))).security.allowed_hosts
    for host in ("0.0.0.0", "192.0.2.7", "toolwise.example"):
        with pytest.raises(ConfigError, match="without a token"):
            http_access(host, Settings())
    assert http_access("127.0.0.5", Settings()).token is None


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    text: str


async def _answer(path: str, headers: dict[str, str]) -> Answer:
    """What BearerAuth in front of an app that answers "served" answers a POST to `path`."""

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        await Response("served")(scope, receive, send)

    sent: list[Message] = []

    async def receive() -> Message:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Message) -> None:
        sent.append(message)

    raw = [(k.lower().encode(), v.encode()) for k, v in headers.items()]
    scope: Scope = {"type": "http", "method": "POST", "path": path, "headers": raw, "query_string": b""}
    await BearerAuth(app, (TOKEN, f"{TOKEN}-bob"))(scope, receive, send)
    start = sent[0]
    body = b"".join(m.get("body", b"") for m in sent[1:])
    return Answer(start["status"], {k.decode().lower(): v.decode() for k, v in start["headers"]}, body.decode())


async def test_a_401_is_the_static_bearer_challenge_and_oauth_discovery_finds_nothing_to_discover() -> None:
    missing = await _answer("/mcp", {})
    assert (missing.status, missing.headers["www-authenticate"]) == (401, 'Bearer realm="toolwise"')
    wrong = await _answer("/mcp", {"Authorization": "Bearer not-" + TOKEN})
    assert (wrong.status, wrong.headers["www-authenticate"]) == (
        401,
        'Bearer realm="toolwise", error="invalid_token", error_description="not the token toolwise takes"',
    )
    assert "Authorization: Bearer" in missing.text and "not OAuth" in missing.text
    for path in (
        "/.well-known/oauth-protected-resource/mcp",
        "/.well-known/oauth-protected-resource",
        "/.well-known/oauth-authorization-server",
        "/.well-known/openid-configuration",
    ):
        discovery = await _answer(path, {})
        assert discovery.status == 404 and "www-authenticate" not in discovery.headers, path
    assert (await _answer("/mcp", {"Authorization": f"Bearer {TOKEN}"})).text == "served"
    assert (await _answer("/mcp", {"Authorization": f"Bearer {TOKEN}-bob"})).text == "served"  # each client's


def test_a_token_file_saved_with_a_byte_order_mark_gives_the_token_as_written(tmp_path: Path) -> None:
    """Windows Notepad starts a UTF-8 file with a byte order mark: the first token is still the one
    written, not one no client can send (every request 401 'invalid bearer token')."""
    file = tmp_path / "tokens"
    file.write_bytes(b"\xef\xbb\xbf" + f"{TOKEN}\r\n{TOKEN}-bob\r\n".encode())
    assert load_tokens(Settings(http_token_file=file)) == (TOKEN, f"{TOKEN}-bob")
