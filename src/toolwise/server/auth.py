"""Who may talk to the HTTP transport: a bearer token, and the Host/Origin names it answers to.

The token comes from `TOOLWISE_HTTP_TOKEN` or the file named by `http_token_file` and is compared in
constant time (`hmac.compare_digest`), on every path (/mcp and /metrics). Host and Origin checks (DNS
rebinding protection) are the SDK's own `TransportSecuritySettings`, switched on whatever the bind
address (the SDK does so only for the exact strings 127.0.0.1, localhost and ::1), and applied to
/metrics too. The SDK's OAuth resource-server support does not fit a static token (it wants an issuer
and a token verifier), so the bearer check is this small ASGI middleware.

A 401 carries the challenge RFC 6750 (section 3) gives a bearer-token resource: `Bearer realm="toolwise"`,
with `error="invalid_token"` and a description only when a wrong token was sent (a request without one
gets no error code), and no `resource_metadata`: there is no authorization server to discover. An MCP
client that looks for one anyway (the MCP authorization spec's fallback to the RFC 9728 and RFC 8414
well-known URIs) gets a 404 there without a token, which ends its discovery with "no OAuth here", not
a second 401 that sends it down an OAuth flow that cannot succeed.
"""

from __future__ import annotations

import hmac
import ipaddress
from dataclasses import dataclass

from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from toolwise.config import ConfigError, Settings

MIN_TOKEN_LENGTH = 16  # characters; `python -c "import secrets; print(secrets.token_urlsafe(32))"` gives 43
LOOPBACK_HOSTS = ["127.0.0.1", "localhost", "[::1]"]
_WILDCARDS = {"0.0.0.0", "::", ""}  # names of "every address": not a name a client sends


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a DNS name: it may resolve to anything


def load_token(settings: Settings) -> str | None:
    """The bearer token clients must send, or None (no authentication)."""
    if settings.http_token is not None and settings.http_token_file is not None:
        raise ConfigError("give the HTTP token either in TOOLWISE_HTTP_TOKEN or in http_token_file, not both")
    if settings.http_token_file is not None:
        try:
            token = settings.http_token_file.read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise ConfigError(f"http_token_file {settings.http_token_file}: {exc.strerror}") from exc
    elif settings.http_token is not None:
        token = settings.http_token.get_secret_value().strip()
    else:
        return None
    if len(token) < MIN_TOKEN_LENGTH:
        raise ConfigError(f"the HTTP token must be at least {MIN_TOKEN_LENGTH} characters, got {len(token)}")
    return token


def security_settings(host: str, settings: Settings) -> TransportSecuritySettings:
    """Host/Origin checks for this bind address: loopback names, the bind address itself (unless it
    is a wildcard) and whatever `http_allowed_hosts` / `http_allowed_origins` add."""
    names = list(LOOPBACK_HOSTS)
    if host not in _WILDCARDS and f"[{host}]" not in names and host not in names:
        names.append(f"[{host}]" if ":" in host else host)
    hosts = [h for name in names for h in (name, f"{name}:*")] + list(settings.http_allowed_hosts)
    origins = [f"{scheme}://{name}:*" for name in names for scheme in ("http", "https")]
    origins += [f"{scheme}://{name}" for name in names for scheme in ("http", "https")]
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=hosts,
        allowed_origins=origins + list(settings.http_allowed_origins),
    )


@dataclass(frozen=True, slots=True)
class HttpAccess:
    token: str | None
    security: TransportSecuritySettings

    async def check_metrics(self, request: Request) -> Response | None:
        """The Host/Origin verdict for a plain route (/metrics), as the SDK gives it for /mcp."""
        return await TransportSecurityMiddleware(self.security).validate_request(request)


def http_access(host: str, settings: Settings) -> HttpAccess:
    """What guards an HTTP server bound to `host`; refuses (ConfigError) a non-loopback bind without a
    token, where anyone who can reach the port could run every tool."""
    token = load_token(settings)
    if token is None and not is_loopback(host):
        raise ConfigError(
            f"refusing to serve HTTP on {host!r} without a token: anyone who can reach it could run every "
            "tool. Set TOOLWISE_HTTP_TOKEN or http_token_file, or bind 127.0.0.1"
        )
    return HttpAccess(token, security_settings(host, settings))


OAUTH_DISCOVERY = (  # well-known URIs of OAuth discovery (RFC 9728, RFC 8414, OpenID Connect), any suffix
    "/.well-known/oauth-protected-resource",
    "/.well-known/oauth-authorization-server",
    "/.well-known/openid-configuration",
)
NO_OAUTH = (
    b"toolwise takes a static bearer token, not OAuth: send Authorization: Bearer <the token in"
    b" TOOLWISE_HTTP_TOKEN or http_token_file>\n"
)


class BearerAuth:
    """ASGI middleware: every HTTP request needs `Authorization: Bearer <token>`, else 401; OAuth
    discovery's well-known URIs answer 404 (see the module's docstring). The `open_paths` (the health
    probe's) need none."""

    def __init__(self, app: ASGIApp, token: str, open_paths: tuple[str, ...] = ()) -> None:
        self.app = app
        self._expected = token.encode()
        self._open = frozenset(open_paths)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in self._open:
            await self.app(scope, receive, send)
            return
        header = dict(scope["headers"]).get(b"authorization")
        if scope["path"].startswith(OAUTH_DISCOVERY):
            response = Response(NO_OAUTH, status_code=404, media_type="text/plain")
        elif header is None or header[:7].lower() != b"bearer ":
            response = _unauthorized('Bearer realm="toolwise"', b"missing bearer token: " + NO_OAUTH)
        elif not hmac.compare_digest(header[7:].strip(), self._expected):
            challenge = (
                'Bearer realm="toolwise", error="invalid_token", error_description="not the token toolwise takes"'
            )
            response = _unauthorized(challenge, b"invalid bearer token: " + NO_OAUTH)
        else:
            await self.app(scope, receive, send)
            return
        await response(scope, receive, send)


def _unauthorized(challenge: str, message: bytes) -> Response:
    return Response(message, status_code=401, headers={"WWW-Authenticate": challenge}, media_type="text/plain")
