"""Who may talk to the HTTP transport: a bearer token, and the Host/Origin names it answers to.

The token comes from `TOOLWISE_HTTP_TOKEN` or the file named by `http_token_file`, which may hold
several, one a line (one for each client: over 2026-07-28 HTTP, where a request has no connection,
the token is what tells clients apart, `downstream/callers.py`), and is compared in constant time
(`hmac.compare_digest`, against every token), on every path (/mcp and /metrics). Host and Origin checks (DNS
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

A browser cannot send a bearer header, so /dashboard also takes the token once as `?token=`: the answer
is a redirect to the same page without it that sets an HttpOnly, SameSite=Strict cookie scoped to
/dashboard. The cookie holds an HMAC of the token, not the token: it opens the dashboard's read-only
page and nothing else (not /mcp, not /metrics).
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import logging
import re
from dataclasses import dataclass
from urllib.parse import urlencode

from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
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


def shown_host(host: str) -> str:
    """The name an address printed for a server bound to `host` uses: a loopback one when it binds every
    address (a browser sent to 0.0.0.0 sends that Host, which the Host check refuses), IPv6 in brackets."""
    if host in ("0.0.0.0", ""):
        return "127.0.0.1"
    if host == "::":
        return "[::1]"
    return f"[{host}]" if ":" in host else host


def load_tokens(settings: Settings) -> tuple[str, ...] | None:
    """The bearer tokens clients may send (the file's: one a line, blank lines and `#` comments
    skipped), or None (no authentication)."""
    if settings.http_token is not None and settings.http_token_file is not None:
        raise ConfigError("give the HTTP token either in TOOLWISE_HTTP_TOKEN or in http_token_file, not both")
    if settings.http_token_file is not None:
        try:
            text = settings.http_token_file.read_text(encoding="utf-8-sig")  # Notepad saves a BOM
        except OSError as exc:
            raise ConfigError(f"http_token_file {settings.http_token_file}: {exc.strerror}") from exc
        lines = [line.strip() for line in text.splitlines()]
        tokens = tuple(dict.fromkeys(line for line in lines if line and not line.startswith("#")))
        if not tokens:
            raise ConfigError(f"http_token_file {settings.http_token_file} holds no token")
    elif settings.http_token is not None:
        tokens = (settings.http_token.get_secret_value().strip(),)
    else:
        return None
    for token in tokens:
        if len(token) < MIN_TOKEN_LENGTH:
            raise ConfigError(f"the HTTP token must be at least {MIN_TOKEN_LENGTH} characters, got {len(token)}")
    return tokens


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
    token: tuple[str, ...] | None  # the tokens a client may send (one each), or None
    security: TransportSecuritySettings

    async def check_metrics(self, request: Request) -> Response | None:
        """The Host/Origin verdict for a plain route (/metrics, /dashboard), as the SDK gives it for /mcp."""
        return await TransportSecurityMiddleware(self.security).validate_request(request)


def http_access(host: str, settings: Settings, exposed: str = "run every tool") -> HttpAccess:
    """What guards an HTTP server bound to `host`; refuses (ConfigError) a non-loopback bind without a
    token, where anyone who can reach the port could do what `exposed` says (`toolwise dashboard` runs
    no tool: it shows what was recorded)."""
    token = load_tokens(settings)
    if token is None and not is_loopback(host):
        raise ConfigError(
            f"refusing to serve HTTP on {host!r} without a token: anyone who can reach it could {exposed}. "
            "Set TOOLWISE_HTTP_TOKEN or http_token_file, or bind 127.0.0.1"
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


DASHBOARD = "/dashboard"
DASHBOARD_COOKIE = "toolwise_dashboard"


def dashboard_cookie(token: str) -> str:
    """The dashboard cookie's value for `token`: an HMAC of it, which opens the dashboard only."""
    return hmac.new(token.encode(), b"toolwise dashboard cookie", hashlib.sha256).hexdigest()


class BearerAuth:
    """ASGI middleware: every HTTP request needs `Authorization: Bearer <one of the tokens>`, else 401;
    OAuth discovery's well-known URIs answer 404; /dashboard also takes `?token=` once, then its cookie
    (see the module's docstring). The `open_paths` (the health probe's) need none."""

    def __init__(self, app: ASGIApp, token: str | tuple[str, ...], open_paths: tuple[str, ...] = ()) -> None:
        self.app = app
        self._open = frozenset(open_paths)
        tokens = (token,) if isinstance(token, str) else token
        self._expected = [t.encode() for t in tokens]
        self._cookies = [dashboard_cookie(t).encode() for t in tokens]  # the dashboard's, a token each

    def _known(self, sent: bytes) -> bool:
        """Compared with every token, so the time taken says nothing about which one came close."""
        return self._which(sent, self._expected) is not None

    @staticmethod
    def _which(sent: bytes, expected: list[bytes]) -> int | None:
        """The index of the value `sent` equals, each compared in constant time."""
        matches = [hmac.compare_digest(sent, value) for value in expected]
        return matches.index(True) if any(matches) else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in self._open:
            await self.app(scope, receive, send)
            return
        header = dict(scope["headers"]).get(b"authorization")
        if header is None and (scope["path"] == DASHBOARD or scope["path"].startswith(DASHBOARD + "/")):
            response = self._dashboard(Request(scope))
            if response is None:
                await self.app(scope, receive, send)
            else:
                await response(scope, receive, send)
            return
        if scope["path"].startswith(OAUTH_DISCOVERY):
            response = Response(NO_OAUTH, status_code=404, media_type="text/plain")
        elif header is None or header[:7].lower() != b"bearer ":
            response = _unauthorized('Bearer realm="toolwise"', b"missing bearer token: " + NO_OAUTH)
        elif not self._known(header[7:].strip()):
            challenge = (
                'Bearer realm="toolwise", error="invalid_token", error_description="not the token toolwise takes"'
            )
            response = _unauthorized(challenge, b"invalid bearer token: " + NO_OAUTH)
        else:
            await self.app(scope, receive, send)
            return
        await response(scope, receive, send)

    def _dashboard(self, request: Request) -> Response | None:
        """A browser at /dashboard: None (let it in) for the dashboard's cookie; for the right `?token=`,
        a redirect to the page without it that sets the cookie; else 401 saying how to get in."""
        given = request.query_params.get("token")
        if given is not None:
            which = self._which(given.strip().encode(), self._expected)
            if which is None:
                return _unauthorized(
                    'Bearer realm="toolwise", error="invalid_token"', b"invalid token for the dashboard\n"
                )
            rest = urlencode([(k, v) for k, v in request.query_params.multi_items() if k != "token"])
            response = RedirectResponse(request.url.path + (f"?{rest}" if rest else ""), status_code=303)
            response.set_cookie(
                DASHBOARD_COOKIE,
                self._cookies[which].decode(),
                path=DASHBOARD,
                httponly=True,
                samesite="strict",
                secure=request.url.scheme == "https",
            )
            return response
        cookie = request.cookies.get(DASHBOARD_COOKIE)
        if cookie is not None and self._which(cookie.encode(), self._cookies) is not None:
            return None
        return _unauthorized(
            'Bearer realm="toolwise"',
            b"the dashboard needs the token: open /dashboard?token=<the token in TOOLWISE_HTTP_TOKEN or"
            b" http_token_file> once (it sets a cookie), or send Authorization: Bearer <token>\n",
        )


# a query parameter whose name says it holds a secret (`token`, `api_key`, `secret`, `password`, `auth`, …)
_TOKEN_IN_QUERY = re.compile(r"(?i)([?&][\w.-]*(?:token|key|secret|passw|auth|sig)[\w.-]*=)[^&\s]*")


class TokenQueryRedaction(logging.Filter):
    """Masks secrets in the query of uvicorn's access log: the dashboard's link carries the bearer token,
    a URL toolwise is reached at may carry a key, and stderr is kept in a file by the client (Claude
    Desktop's `mcp-server-toolwise.log`)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(
                _TOKEN_IN_QUERY.sub(r"\1***", arg) if isinstance(arg, str) else arg for arg in record.args
            )
        return True


def redact_access_log() -> None:
    """Installs `TokenQueryRedaction` on uvicorn's access logger (once)."""
    access = logging.getLogger("uvicorn.access")
    if not any(isinstance(f, TokenQueryRedaction) for f in access.filters):
        access.addFilter(TokenQueryRedaction())


def _unauthorized(challenge: str, message: bytes) -> Response:
    return Response(message, status_code=401, headers={"WWW-Authenticate": challenge}, media_type="text/plain")
