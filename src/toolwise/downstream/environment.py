"""The environment a stdio downstream starts with.

The SDK passes a downstream only HOME, LOGNAME, PATH, SHELL, TERM and USER (so that toolwise's own
secrets do not leak into every server). Tools such as npx, uvx, pip and git also need what makes the
network work where the user's shell works: CA certificates behind a TLS-inspecting proxy, the proxy
itself, the registry and cache they are configured with, the locale. Those are passed too, when set;
the server's own `env` comes last and wins. `toolwise doctor` starts servers with exactly this.
A client app started from a desktop has none of the shell's variables, so `toolwise install` writes
the NETWORK ones set in the shell it runs in into toolwise's entry, as it writes PATH.
`resolve_command` finds the executable a stdio downstream's command names.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from pathlib import Path

NETWORK = (
    # CA certificates (Python's ssl and requests, Node, curl, git, pip)
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "NODE_EXTRA_CA_CERTS",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
    "GIT_SSL_CAINFO",
    "PIP_CERT",
    # proxies (both spellings are in use)
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
    "no_proxy",
)
INHERITED = (
    *NETWORK,
    # package registries and caches of the launchers servers are started with (npx, uvx, pipx)
    "NPM_CONFIG_REGISTRY",
    "NPM_CONFIG_CACHE",
    "NPM_CONFIG_PREFIX",
    "npm_config_registry",
    "npm_config_cache",
    "npm_config_prefix",
    "UV_INDEX_URL",
    "UV_DEFAULT_INDEX",
    "UV_CACHE_DIR",
    "PIP_INDEX_URL",
    "PIP_EXTRA_INDEX_URL",
    "NODE_OPTIONS",
    # locale, time zone, temporary and per-user folders
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "TZ",
    "TMPDIR",
    "XDG_CONFIG_HOME",
    "XDG_DATA_HOME",
    "XDG_CACHE_HOME",
    "XDG_RUNTIME_DIR",
)


def network_variables() -> dict[str, str]:
    """The NETWORK variables set here (what `toolwise install` passes on to the client's toolwise entry)."""
    return {name: os.environ[name] for name in NETWORK if name in os.environ}


def downstream_environment(own: dict[str, str] | None) -> dict[str, str]:
    """What a stdio downstream is started with: the SDK's minimum, the INHERITED variables that are set
    here, then the server's own `env`."""
    from mcp.client.stdio import get_default_environment  # the MCP client: not for every CLI command

    inherited = {name: os.environ[name] for name in INHERITED if name in os.environ}
    return get_default_environment() | inherited | (own or {})


def resolve_command(command: str, path: str | None = None) -> str:
    """The executable for `command`: on `path` (the PATH the server is started with, which its `env` may set:
    a client looks there too), else beside this interpreter (a venv's bin/ that is not on PATH still finds
    the servers installed into it)."""
    found = shutil.which(command, path=path)
    if found:
        return found
    local = Path(sys.executable).parent / command
    return str(local) if local.exists() else command


def command_found(command: str, cwd: str | None = None) -> bool:
    """Whether toolwise would find `command`: on PATH, beside its interpreter, or a path to a file (a relative
    one from `cwd`, the server's own folder, where it is started: `./node_modules/.bin/x` of a project)."""
    resolved = resolve_command(command)
    named_path = "/" in command or os.sep in command  # a bare name is looked for on PATH only, never in a folder
    within = named_path and (Path(cwd or ".") / command).is_file()
    return resolved != command or shutil.which(command) is not None or within


def command_line(command: str) -> list[str] | None:
    """The words of a whole command line written as "command" (a README's `npx -y @scope/server` pasted whole),
    its first word a command found; None for anything else."""
    try:
        words = shlex.split(command)
    except ValueError:  # an unbalanced quote: not a command line a shell would run either
        return None
    return words if len(words) > 1 and command_found(words[0]) else None


# The launchers MCP servers' READMEs start them with, and what provides each (a server's README names its
# own package, not the tool that runs it).
LAUNCHERS = {
    "uvx": "uv (https://docs.astral.sh/uv/)",
    "uv": "uv (https://docs.astral.sh/uv/)",
    "npx": "Node.js (https://nodejs.org/), which brings npx",
    "node": "Node.js (https://nodejs.org/)",
    "docker": "Docker (https://docs.docker.com/get-docker/)",
    "bunx": "Bun (https://bun.sh/)",
    "deno": "Deno (https://deno.com/)",
}


def provider_of(command: str) -> str | None:
    """What provides `command` when it is a well-known launcher (`uvx`: uv), to say what to install."""
    return LAUNCHERS.get(Path(command).name.removesuffix(".exe"))
