"""Where the HTTP token comes from, and which Host values each bind address answers to."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolwise.server.auth import http_access, load_token
from toolwise.server.config import ConfigError, Settings

TOKEN = "0123456789abcdef-token"


def test_the_token_comes_from_the_environment_or_a_file_never_both(tmp_path: Path) -> None:
    file = tmp_path / "token"
    file.write_text(TOKEN + "\n")
    assert load_token(Settings(http_token_file=file)) == TOKEN
    assert load_token(Settings(http_token=TOKEN)) == TOKEN
    assert load_token(Settings()) is None
    with pytest.raises(ConfigError, match="not both"):
        load_token(Settings(http_token=TOKEN, http_token_file=file))
    file.write_text("short")
    with pytest.raises(ConfigError, match="at least 16 characters"):
        load_token(Settings(http_token_file=file))
    with pytest.raises(ConfigError, match="No such file"):
        load_token(Settings(http_token_file=tmp_path / "missing"))


def test_every_bind_address_checks_hosts_and_a_public_one_needs_a_token() -> None:
    for host in ("127.0.0.2", "0.0.0.0", "192.0.2.7", "::"):
        allowed = http_access(host, Settings(http_token=TOKEN, http_allowed_hosts=["mcp.example"])).security
        assert allowed.enable_dns_rebinding_protection
        assert "evil.example" not in allowed.allowed_hosts and "mcp.example" in allowed.allowed_hosts
    assert "192.0.2.7:*" in http_access("192.0.2.7", Settings(http_token=TOKEN)).security.allowed_hosts
    for host in ("0.0.0.0", "192.0.2.7", "toolwise.example"):
        with pytest.raises(ConfigError, match="without a token"):
            http_access(host, Settings())
    assert http_access("127.0.0.5", Settings()).token is None
