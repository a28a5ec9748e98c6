"""Configuration: the Claude-Desktop-shaped file (`mcpServers`) plus toolwise's own settings.

`Settings` is the one place defaults live. Values come from the file's `"toolwise"` section and from
`TOOLWISE_*` environment variables (the environment wins, so a deployment can override a file).
"""

from __future__ import annotations

import difflib
import json
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    SecretStr,
    Tag,
    TypeAdapter,
    ValidationError,
    field_validator,
)
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict, SettingsError

from toolwise.feedback.files import data_dir, default_database_url
from toolwise.feedback.records import MAX_SERVER_NAME
from toolwise.rl.policy_names import POLICY_NAMES

if TYPE_CHECKING:  # the SDK is imported by what serves, not by every command's config
    from mcp.server import Server
    from mcp.server.mcpserver import MCPServer


class ConfigError(Exception):
    """A configuration file that cannot be used; the message names the file and the field."""


# What a downstream's tools and prompts are named under: `prefix__tool`; None means the server's own
# name, "" the bare names. No "__" inside, so a public name still reads as prefix__tool.
Prefix = Annotated[str | None, Field(default=None, pattern=r"^_?([A-Za-z0-9-]+_?)*$")]


# Which of a downstream's tools toolwise offers (Gemini CLI's keys on a server entry): names or globs
# (fnmatch); every tool when `includeTools` is absent, and `excludeTools` wins over it. A tool left out is
# neither listed nor callable nor learned.
IncludeTools = Annotated[list[str] | None, Field(default=None, alias="includeTools")]
ExcludeTools = Annotated[list[str], Field(default_factory=list, alias="excludeTools")]


class StdioServer(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    prefix: Prefix
    include_tools: IncludeTools
    exclude_tools: ExcludeTools
    type: Literal["stdio"] | None = None  # Claude Desktop's own keys: `type` and `disabled`
    command: str = Field(min_length=1)
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] | None = None
    cwd: str | None = None
    disabled: bool = False  # true: kept in the file, not started


class HttpServer(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    prefix: Prefix
    include_tools: IncludeTools
    exclude_tools: ExcludeTools
    type: Literal["http", "streamable-http", "streamableHttp"] | None = None
    url: str
    headers: dict[str, str] | None = None
    disabled: bool = False

    @field_validator("url")
    @classmethod
    def _http(cls, value: str) -> str:
        """An http(s) URL, or one given whole by a `${VAR}` left as written while unset (a disabled server's, or
        for doctor, which fails that server alone: `expand_variables`)."""
        if value.startswith(("http://", "https://", "${")):
            return value
        raise ValueError(f"must start with http:// or https:// (got {value!r})")

    @field_validator("type", mode="before")
    @classmethod
    def _not_sse(cls, value: object) -> object:
        """SSE, the transport streamable HTTP replaced (2025-03-26), named as such: the literal's own error
        listed the types taken and left a user of an SSE server to guess why theirs was not one."""
        if isinstance(value, str) and value.lower() == "sse":
            raise ValueError(
                "SSE, the older HTTP transport, is not served by toolwise; use the server's streamable HTTP "
                "endpoint instead ('type': 'http', its URL often ending in /mcp)"
            )
        return value


HTTP_TYPES = (
    "http",
    "streamable-http",
    "streamableHttp",
    "sse",
)  # `type`s of an entry with a URL (SSE: refused by name)


def server_kind(entry: Any) -> str:
    """Which shape a server entry has, read from its keys (a `url`, or an HTTP `type`: HTTP; else stdio), so
    that a misspelt key is reported against that shape alone: tried as each in turn, a stdio entry's typo
    also read `url: Field required` and "did you mean 'command'?" of the `command` it has."""
    if isinstance(entry, BaseModel):
        return "http" if isinstance(entry, HttpServer) else "stdio"
    is_http = isinstance(entry, dict) and ("url" in entry or entry.get("type") in HTTP_TYPES)
    return "http" if is_http else "stdio"


SERVER_KINDS = ("stdio", "http")  # the tags of `Downstream`, which describe() leaves out of a field's path
Downstream = Annotated[
    Annotated[StdioServer, Tag("stdio")] | Annotated[HttpServer, Tag("http")], Discriminator(server_kind)
]


@dataclass(frozen=True)
class InProcessServer:
    """A downstream in toolwise's own process: an SDK `Server` or `MCPServer`, reached through
    `mcp.Client(server)` as the SDK's own tests reach one. Given in code (`Toolwise(config, in_process={name:
    …})`), never in a config file: for an agent that embeds toolwise in Python, and for tests without a
    process each."""

    server: Server[Any] | MCPServer
    prefix: str | None = None
    disabled: bool = False
    include_tools: list[str] | None = None
    exclude_tools: tuple[str, ...] = ()


ServerSpec = StdioServer | HttpServer | InProcessServer


class RewardSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")
    success: float = 10.0
    failure: float = -5.0
    rating_per_point: float = 2.0
    latency_per_second: float = 0.1
    fast_bonus: float = 2.0


class Settings(BaseSettings):
    """toolwise's own settings (`"toolwise": {…}` in the config file, or `TOOLWISE_<NAME>`)."""

    # hide_input_in_errors: a wrong value (a token written as a number) is not quoted whole in the traceback
    model_config = SettingsConfigDict(
        env_prefix="TOOLWISE_", extra="forbid", env_nested_delimiter="__", hide_input_in_errors=True
    )

    database_url: str = Field(default_factory=default_database_url)
    namespace: str = Field(default="default", min_length=1, max_length=64)
    policy: str = "outcome"
    # the prior's text embedding (minilm: all-MiniLM-L6-v2 in numpy, its wheel installed; none: lexical BM25)
    embedding: Literal["wordllama", "minilm", "none"] = "wordllama"
    seed: int | None = None  # fixed seed → reproducible decisions (tests, demos)
    reward: RewardSettings = Field(default_factory=RewardSettings)
    store_arguments: bool = False
    share_arguments: bool = False  # on: argument values that worked are suggested to every client, not only their own
    store_queries: bool = True  # off: recommend_tool queries and rating comments are never stored
    flush_interval_ms: float = Field(default=20.0, ge=0)  # group commit: the longest a record waits in memory
    sqlite_synchronous: Literal["FULL", "NORMAL"] = "FULL"  # NORMAL: faster, a power cut may undo the last commits
    store_timeout_s: float = Field(default=10.0, gt=0)  # longest wait for the database before a clear error
    max_query_chars: int = Field(default=4000, ge=1)  # longest recommend_tool query kept (longer ones are cut)
    session_window: int = Field(default=256, ge=1)  # recent calls a session keeps in memory (rating by tool name)
    admin_tools: bool = True
    call_timeout_s: float = Field(default=60.0, gt=0)
    start_timeout_s: float = Field(default=30.0, gt=0)
    start_wait_s: float = Field(default=5.0, ge=0)  # serving waits this long for downstreams; later ones join
    restart_backoff_s: float = Field(default=0.5, gt=0)
    restart_backoff_max_s: float = Field(default=30.0, gt=0)
    mode: Literal["auto", "legacy"] = "auto"  # protocol negotiation with downstream servers
    # capability flags (also TOOLWISE_SHADOW, TOOLWISE_LEARNING, …)
    shadow: bool = False  # learn, but serve the deterministic baseline (the prior's relevance) until switched off
    learning: bool = True  # off: calls are recorded, nothing is learned
    replay: bool = True
    sequences: bool = True
    nothing_fits: bool = True  # off: recommend_tool and search_tools never say that no tool seems to fit
    # the least exploration (ε): 0 lets it fall away while toolwise's picks keep working; more keeps the log
    # varied enough for `inspect evaluate` to judge other policies (and costs that share of picks)
    epsilon_min: float = Field(default=0.0, ge=0, le=1)
    # persistence and sharing
    sync_interval_s: float = Field(default=2.0, ge=0)  # learn other instances' executions this often (0: off)
    sync_gap_grace_s: float = Field(default=10.0, gt=0)  # an id gap older than this is a rolled-back write
    snapshot_interval_s: float = Field(default=300.0, ge=0)  # periodic snapshots (0: only at shutdown)
    snapshot_rows: int = Field(default=50_000, ge=0)  # also snapshot after this many log entries learned (0: off)
    snapshot_keep: int = Field(default=5, ge=1)
    snapshot_sign_key: Path | None = None  # Ed25519 private key (PEM): sign every snapshot taken
    snapshot_verify_key: Path | None = None  # Ed25519 public key (PEM): refuse unsigned or badly signed ones
    snapshot_tools: bool = False  # expose snapshot_* admin MCP tools
    # the only folder the snapshot MCP tools read and write (names given to them are relative to it)
    snapshot_dir: Path = Field(default_factory=lambda: data_dir() / "snapshots")
    retention_days: float | None = Field(default=None, gt=0)  # prune executions older than this
    # shields
    shield_failure_rate: float | None = Field(default=None, ge=0, le=1)  # off: a failure is mostly a wrong pick
    shield_p95_latency_ms: float | None = Field(default=None, gt=0)
    shield_window: int = Field(default=20, ge=1)
    shield_min_calls: int = Field(default=5, ge=1)
    shield_retry_s: float = Field(default=60.0, gt=0)
    circuit_failures: int = Field(default=5, ge=1)  # consecutive downstream failures that open its circuit
    circuit_cooldown_s: float = Field(default=30.0, gt=0)
    # Large catalogues (server/exposure.py): what tools/list shows. all: every tool; search: pinned +
    # search_tools + call_tool; learned: those + the exposure_k tools ranked highest for the client's
    # recent requests. Every tool stays callable by name in every mode.
    exposure: Literal["all", "search", "learned"] = "all"
    pinned_tools: list[str] = Field(default_factory=list)  # names or globs (fnmatch) always listed
    exposure_k: int = Field(default=8, ge=1, le=50)  # learned mode: tools listed besides the pinned ones
    exposure_interval_s: float = Field(default=10.0, ge=0)  # learned mode: least time between set changes per client
    # HTTP transport: a bearer token (required to bind a non-loopback address) and the names it answers to
    http_token: SecretStr | None = None  # prefer TOOLWISE_HTTP_TOKEN to the file
    http_token_file: Path | None = None  # a file holding the token (surrounding whitespace ignored)
    http_allowed_hosts: list[str] = Field(default_factory=list)  # more Host values, e.g. "toolwise.example:*"
    http_allowed_origins: list[str] = Field(default_factory=list)  # more Origin values, e.g. "https://app.example"

    @field_validator("policy")
    @classmethod
    def _known_policy(cls, value: str) -> str:
        if value not in POLICY_NAMES:
            raise ValueError(f"must be one of {list(POLICY_NAMES)}, got {value!r}")
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


def settings_of(section: Mapping[str, Any]) -> Settings:
    """Settings of the file's `toolwise` section and the `TOOLWISE_*` environment. A variable pydantic-settings
    cannot parse (a list or an object is read as JSON: `TOOLWISE_PINNED_TOOLS=git__*`) is a ConfigError naming
    it, as a bad value is; it raised its own SettingsError, a traceback."""
    try:
        return Settings(**section)
    except SettingsError as exc:
        field = re.search(r'field "([^"]+)"', str(exc))
        name = f"TOOLWISE_{field.group(1).upper()}" if field else "a TOOLWISE_* variable"
        raise ConfigError(
            f"{name}: not JSON ({exc.__cause__ or exc}); a list or an object is written in JSON there, "
            "e.g. TOOLWISE_PINNED_TOOLS='[\"git__*\"]'"
        ) from exc


class AppConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, hide_input_in_errors=True)  # as Settings'
    servers: dict[str, Downstream] = Field(alias="mcpServers")
    toolwise: Settings = Field(default_factory=Settings)

    @field_validator("servers")
    @classmethod
    def _names(cls, servers: dict[str, Any]) -> dict[str, Any]:
        for name in servers:
            if not name or "__" in name:
                raise ValueError(f"server name {name!r} must be non-empty and must not contain '__'")
            if len(name) > MAX_SERVER_NAME:  # PostgreSQL would refuse every batch of records carrying it
                raise ValueError(
                    f"server name {name!r} is {len(name)} characters: the log keeps at most {MAX_SERVER_NAME}; "
                    "shorten it"
                )
        owners: dict[str, str] = {}
        for name, spec in servers.items():
            prefix = prefix_of(name, spec)
            if prefix in owners:
                raise ValueError(
                    f"servers {owners[prefix]!r} and {name!r} both name their tools with prefix {prefix!r}; "
                    "give one of them another 'prefix'"
                )
            owners[prefix] = name
        return servers

    @property
    def enabled_servers(self) -> dict[str, StdioServer | HttpServer]:
        """The downstreams to start (those not marked `"disabled": true`)."""
        return {name: spec for name, spec in self.servers.items() if not spec.disabled}

    def downstreams(self, in_process: Mapping[str, InProcessServer] | None = None) -> dict[str, ServerSpec]:
        """The enabled downstreams of the file and those given in code; a name in both is a ConfigError."""
        both = sorted(set(self.servers) & set(in_process or {}))
        if both:
            raise ConfigError(f"downstream {both[0]!r} is both in mcpServers and given in-process; rename one")
        long = [name for name in in_process or {} if len(name) > MAX_SERVER_NAME]
        if long:
            raise ConfigError(f"in-process downstream {long[0]!r}: the log keeps names of at most {MAX_SERVER_NAME}")
        given = {name: spec for name, spec in (in_process or {}).items() if not spec.disabled}
        return {**self.enabled_servers, **given}


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object whose keys are all distinct (json keeps the last of duplicates silently)."""
    keys = [key for key, _ in pairs]
    twice = sorted({key for key in keys if keys.count(key) > 1})
    if twice:
        named = ", ".join(repr(k) for k in twice)
        raise ConfigError(f"{named} defined more than once in one object (a second definition would replace the first)")
    return dict(pairs)


def prefix_of(name: str, spec: ServerSpec) -> str:
    """The prefix of a downstream's public names: its `prefix` setting, else its name."""
    return name if spec.prefix is None else spec.prefix


def load_config(path: Path, *, unset_kept: bool = False) -> AppConfig:
    """Read and validate a config file; any problem becomes one ConfigError naming the field. `unset_kept`:
    for a command that starts no server (it reads the database), or doctor (which fails that server alone), a
    `${VAR}` the environment lacks stays as written: the secret is set where toolwise serves (the client
    entry's env), not in every shell."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"), object_pairs_hook=_unique_keys)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from exc
    except FileNotFoundError as exc:
        raise ConfigError(f"{path}: no such file") from exc
    except OSError as exc:  # a folder, no permission
        raise ConfigError(f"{path}: cannot read it ({exc.strerror})") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (byte {exc.start}); save it as UTF-8") from exc
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})") from exc
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: the top level must be an object with an 'mcpServers' field")
    for key in raw:
        # Other top-level keys are left alone (a Claude Desktop config may be served as it is); a near miss
        # of ours is a typo that would otherwise drop the servers or the settings without a word.
        if key not in TOP_LEVEL and (near := did_you_mean(key, TOP_LEVEL)):
            raise ConfigError(f"{path}: unknown key {key!r}{near}")
    if "mcpServers" not in raw:
        raise ConfigError(f"{path}: no 'mcpServers' object (the servers toolwise stands in front of)")
    try:
        servers = expand_variables(raw["mcpServers"], os.environ, unset_kept=unset_kept)
        settings = settings_of(raw.get("toolwise", {}))
        return AppConfig.model_validate({"mcpServers": servers, "toolwise": settings})
    except ConfigError as exc:  # an unset ${VAR}, a TOOLWISE_* variable that is not JSON
        raise ConfigError(f"{path}: {exc}") from exc
    except ValidationError as exc:
        raise ConfigError(f"{path}: {describe(exc, os.environ)}") from exc
    except TypeError as exc:
        raise ConfigError(f"{path}: 'toolwise' must be an object ({exc})") from exc


TOP_LEVEL = ("mcpServers", "toolwise")
EXPANDED = ("command", "args", "env", "cwd", "url", "headers")  # the server fields `${VAR}` may appear in
# `${VAR}` and `${VAR:-default}` (the shell's, Claude Code's) and Cursor's `${env:VAR}`; Cursor's `${userHome}` is
# the home folder: `toolwise install` moves a client's entries as written, so they are read as the client reads them.
REFERENCE = re.compile(r"\$\{(?:env:)?([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
HOME_REFERENCE = "${userHome}"


def expand_variables(servers: Any, environ: Mapping[str, str], *, unset_kept: bool = False) -> Any:
    """The servers with `${VAR}` and `${VAR:-default}` (`REFERENCE`) in their command, args, env, cwd, url and
    headers replaced from the environment when the file is loaded (as Claude Code reads a `.mcp.json`), so a
    config can name a secret instead of holding it. A variable that is unset and has no default is a
    ConfigError naming it and where it is used (`unset_kept`, or a server marked `"disabled": true`, which is
    not started and is often disabled for want of its secret: left as written)."""
    if not isinstance(servers, dict):
        return servers  # validation says what is wrong with it

    def expand(value: Any, where: str, kept: bool) -> Any:
        if isinstance(value, list):
            return [expand(v, f"{where}[{i}]", kept) for i, v in enumerate(value)]
        if isinstance(value, dict):
            return {k: expand(v, f"{where}.{k}", kept) for k, v in value.items()}
        if not isinstance(value, str):
            return value

        def substitute(match: re.Match[str]) -> str:
            name, default = match.group(1), match.group(2)
            found = environ.get(name)
            if found is None and match.group() == HOME_REFERENCE:
                return str(Path.home())
            if default is not None:
                return found or default  # as the shell's `:-`: unset or empty
            if found is None:
                if kept:
                    return match.group()
                raise ConfigError(
                    f"{where}: environment variable {name!r} is not set (referenced as {match.group()}); "
                    f"set it, or give a default as ${{{name}:-value}}"
                )
            return found

        return REFERENCE.sub(substitute, value)

    def expanded(name: str, spec: dict[str, Any]) -> dict[str, Any]:
        kept = unset_kept or marked_disabled(spec)
        return {
            key: expand(value, f"mcpServers.{name}.{key}", kept) if key in EXPANDED else value
            for key, value in spec.items()
        }

    return {name: expanded(name, spec) if isinstance(spec, dict) else spec for name, spec in servers.items()}


def marked_disabled(spec: dict[str, Any]) -> bool:
    """Whether a server entry says `"disabled": true` as its validation will read it (`"true"`, `1`: pydantic's
    lax booleans); a value that is no boolean is validation's to name, so it is not disabled here."""
    try:
        return _BOOL.validate_python(spec.get("disabled", False))
    except ValidationError:
        return False


_BOOL = TypeAdapter(bool)
SHORTEST_HIDDEN = 4  # a referenced value shorter than this (a port, a flag) is not taken for a secret


def referenced_values(servers: Any, environ: Mapping[str, str]) -> dict[str, str]:
    """What each `${VAR}` of the servers' expanded fields resolves to, as value → reference: a command
    that prints a server's url, args or errors shows the reference instead of the secret it stands for."""
    found: dict[str, str] = {}

    def visit(value: Any) -> None:
        if isinstance(value, list):
            for v in value:
                visit(v)
        elif isinstance(value, dict):
            for v in value.values():
                visit(v)
        elif isinstance(value, str):
            for match in REFERENCE.finditer(value):
                resolved = environ.get(match.group(1))
                if resolved and len(resolved) >= SHORTEST_HIDDEN:  # as written, without a default's text
                    found.setdefault(resolved, match.group().partition(":-")[0].removesuffix("}") + "}")

    for spec in servers.values() if isinstance(servers, dict) else ():
        if isinstance(spec, dict):
            visit([value for key, value in spec.items() if key in EXPANDED])
    return found


def did_you_mean(key: str, known: Iterable[str]) -> str:
    """`; did you mean 'x'?` for the known name closest to a misspelt `key`, or "" when none is close."""
    near = closest(key, known)
    return f"; did you mean {near!r}?" if near else ""


def closest(key: str, known: Iterable[str]) -> str | None:
    """The known name closest to a misspelt `key`, or None when none is close."""
    near = difflib.get_close_matches(key, list(known), n=1, cutoff=0.75)
    return near[0] if near else None


def _field_names() -> set[str]:
    """Every key a config may hold inside a server or the toolwise section."""
    models: tuple[type[BaseModel], ...] = (StdioServer, HttpServer, Settings, RewardSettings)
    return {field.alias or name for model in models for name, field in model.model_fields.items()}


def _tag(loc: tuple[int | str, ...], i: int) -> bool:
    """Whether loc[i] is pydantic's name of a union's branch (a server entry's kind: in a config under
    `mcpServers.<name>`, or first when one entry is checked alone), not a field a person can fix."""
    part = str(loc[i])
    kind = part in SERVER_KINDS and (i == 0 or (i == 2 and loc[0] == "mcpServers"))
    return kind or part.startswith(("function-", "union["))


def describe(exc: ValidationError, environ: Mapping[str, str] | None = None, known: Sequence[str] | None = None) -> str:
    """Pydantic errors as `field.path: message; …` (what a person fixing the file needs); an unknown key
    that is a near miss of a known one says which: of the config's keys, or of `known` (a tool's arguments:
    with no near miss, they are listed). With `environ` (the errors are Settings'), a value a `TOOLWISE_*`
    variable gave is named as that variable's: it is not in the file."""
    parts = []
    variables = {name.upper() for name in environ or ()}
    for error in exc.errors():
        loc = error["loc"]
        location = ".".join(str(p) for i, p in enumerate(loc) if not _tag(loc, i))
        hint = ""
        if error["type"] == "extra_forbidden":
            hint = did_you_mean(str(loc[-1]), _field_names() if known is None else known)
            if not hint and known:
                hint = f"; it takes {', '.join(known)}"
        variable = "TOOLWISE_" + "__".join(str(p) for p in loc).upper()
        while variable not in variables and "__" in variable:  # TOOLWISE_REWARD gave all of reward
            variable = variable.rsplit("__", 1)[0]
        if variable in variables:
            hint += f" (from {variable} in the environment, which wins over the file)"
        message = str(error["ctx"]["error"]) if error["type"] == "value_error" else error["msg"]  # no "Value error, "
        parts.append(f"{location or 'value'}: {message}{hint}")
    return "; ".join(dict.fromkeys(parts))
