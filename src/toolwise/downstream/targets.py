"""What the SDK's `Client` connects to for a downstream of each kind: the in-process server, the URL (with
its configured headers on every request), or the stdio command with its environment."""

from __future__ import annotations

import contextlib
from typing import Any

from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from toolwise import sdk
from toolwise.config import HttpServer, InProcessServer, ServerSpec
from toolwise.downstream.environment import downstream_environment, resolve_command


def client_target(spec: ServerSpec, stack: contextlib.AsyncExitStack) -> Any:
    if isinstance(spec, InProcessServer):
        return spec.server
    if isinstance(spec, HttpServer):
        if not spec.headers:
            return spec.url
        # The configured headers (e.g. `Authorization: Bearer …`) go on every request; the
        # transport leaves closing a client it was given to us.
        http = sdk.http_client(headers=spec.headers)
        stack.push_async_callback(http.aclose)
        return streamable_http_client(spec.url, http_client=http)
    env = downstream_environment(spec.env)  # more than the SDK's minimum: downstream/environment.py
    return StdioServerParameters(command=resolve_command(spec.command), args=spec.args, env=env, cwd=spec.cwd)
