"""Configuration: the Claude-Desktop-shaped file (`mcpServers`) plus toolwise's own settings.

`Settings` is the one place defaults live. Values come from the file's `"toolwise"` section and from
`TOOLWISE_*` environment variables (the environment wins, so a deployment can override a file).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from toolwise.feedback import default_database_url
from toolwise.rl import POLICIES


class ConfigError(Exception):
    """A configuration file that cannot be used; the message names the file and the field."""


class StdioServer(BaseModel):
    model_config = ConfigDict(extra="forbid")
    command: str = Field(min_length=1)
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] | None = None
    cwd: str | None = None


class HttpServer(BaseModel):
    model_config = ConfigDict(extra="forbid")
    url: str = Field(pattern=r"^https?://")
    headers: dict[str, str] | None = None


Downstream = Annotated[StdioServer | HttpServer, Field(union_mode="left_to_right")]


class RewardSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")
    success: float = 10.0
    failure: float = -5.0
    rating_per_point: float = 2.0
    latency_per_second: float = 0.1
    fast_bonus: float = 2.0


class Settings(BaseSettings):
    """toolwise's own settings (`"toolwise": {…}` in the config file, or `TOOLWISE_<NAME>`)."""

    model_config = SettingsConfigDict(env_prefix="TOOLWISE_", extra="forbid", env_nested_delimiter="__")

    database_url: str = Field(default_factory=default_database_url)
    namespace: str = Field(default="default", min_length=1, max_length=64)
    policy: str = "linucb"
    seed: int | None = None  # fixed seed → reproducible decisions (tests, demos)
    reward: RewardSettings = Field(default_factory=RewardSettings)
    store_arguments: bool = False
    flush_interval_ms: float = Field(default=20.0, ge=0)  # group commit: the longest a record waits in memory
    sqlite_synchronous: Literal["FULL", "NORMAL"] = "FULL"  # NORMAL: faster, a power cut may undo the last commits
    admin_tools: bool = True
    call_timeout_s: float = Field(default=60.0, gt=0)
    start_timeout_s: float = Field(default=30.0, gt=0)
    restart_backoff_s: float = Field(default=0.5, gt=0)
    restart_backoff_max_s: float = Field(default=30.0, gt=0)
    mode: Literal["auto", "legacy"] = "auto"  # protocol negotiation with downstream servers
    # capability flags (also TOOLWISE_SHADOW, TOOLWISE_LEARNING, …)
    shadow: bool = False  # learn, but serve the deterministic baseline (lexical relevance) until switched off
    learning: bool = True  # off: calls are recorded, nothing is learned
    replay: bool = True
    sequences: bool = True
    # persistence and sharing
    sync_interval_s: float = Field(default=2.0, ge=0)  # learn other instances' executions this often (0: off)
    sync_gap_grace_s: float = Field(default=10.0, gt=0)  # an id gap older than this is a rolled-back write
    snapshot_interval_s: float = Field(default=300.0, ge=0)  # periodic snapshots (0: only at shutdown)
    snapshot_rows: int = Field(default=50_000, ge=0)  # also snapshot after this many log entries learned (0: off)
    snapshot_keep: int = Field(default=5, ge=1)
    snapshot_sign_key: Path | None = None  # Ed25519 private key (PEM): sign every snapshot taken
    snapshot_verify_key: Path | None = None  # Ed25519 public key (PEM): refuse unsigned or badly signed ones
    snapshot_tools: bool = False  # expose snapshot_* admin MCP tools
    retention_days: float | None = Field(default=None, gt=0)  # prune executions older than this
    # shields
    shield_failure_rate: float | None = Field(default=0.5, ge=0, le=1)
    shield_p95_latency_ms: float | None = Field(default=None, gt=0)
    shield_window: int = Field(default=20, ge=1)
    shield_min_calls: int = Field(default=5, ge=1)
    shield_retry_s: float = Field(default=60.0, gt=0)
    circuit_failures: int = Field(default=5, ge=1)  # consecutive downstream failures that open its circuit
    circuit_cooldown_s: float = Field(default=30.0, gt=0)

    @field_validator("policy")
    @classmethod
    def _known_policy(cls, value: str) -> str:
        if value not in POLICIES:
            raise ValueError(f"must be one of {sorted(POLICIES)}, got {value!r}")
        return value

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return env_settings, init_settings


class AppConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    servers: dict[str, Downstream] = Field(alias="mcpServers")
    toolwise: Settings = Field(default_factory=Settings)

    @field_validator("servers")
    @classmethod
    def _names(cls, servers: dict[str, Any]) -> dict[str, Any]:
        for name in servers:
            if not name or "__" in name:
                raise ValueError(f"server name {name!r} must be non-empty and must not contain '__'")
        return servers


def load_config(path: Path) -> AppConfig:
    """Read and validate a config file; any problem becomes one ConfigError naming the field."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise ConfigError(f"{path}: no such file") from exc
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})") from exc
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: the top level must be an object with an 'mcpServers' field")
    try:
        settings = Settings(**raw.get("toolwise", {}))
        return AppConfig.model_validate({"mcpServers": raw.get("mcpServers"), "toolwise": settings})
    except ValidationError as exc:
        raise ConfigError(f"{path}: {describe(exc)}") from exc
    except TypeError as exc:
        raise ConfigError(f"{path}: 'toolwise' must be an object ({exc})") from exc


def describe(exc: ValidationError) -> str:
    """Pydantic errors as `field.path: message; …` (what a person fixing the file needs)."""
    parts = []
    for error in exc.errors():
        location = ".".join(str(p) for p in error["loc"] if not str(p).startswith(("function-", "union[")))
        parts.append(f"{location or 'value'}: {error['msg']}")
    return "; ".join(dict.fromkeys(parts))
