"""The composition root of the protocol: the low-level MCP `Server` with every handler named here, ours
(`server/handlers.py`: tools/list, tools/call) and the pass-through ones, over the running `Toolwise`."""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable
from typing import Any

import mcp_types as types
from mcp.server import InitializationOptions, NotificationOptions, Server
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from toolwise import __version__
from toolwise.downstream.passthrough import PASSED_THROUGH
from toolwise.server.app import Toolwise
from toolwise.server.handlers import on_call_tool, on_list_tools
from toolwise.server.tracing import middleware

INSTRUCTIONS = (
    "toolwise proxies the tools of several MCP servers (named server__tool) and learns which tool fits "
    "a task. Call recommend_tool with what you want to do before choosing a tool, then rate results "
    "with submit_feedback; recommend_next_tools suggests what usually comes next."
)
SEARCH_INSTRUCTIONS = (
    " Not every tool is listed: search_tools finds the tools for a task (full definitions), the ones above "
    "too when the query names one; call_tool calls any of them by name."
)


def build_server(app: Toolwise) -> Server[Toolwise]:
    """The composition root: the MCP server with every handler named (the handlers reach the running
    app as their lifespan context)."""
    passthrough = app.passthrough
    with warnings.catch_warnings():  # logging/setLevel is the handshake era's, still served to it
        warnings.simplefilter("ignore", MCPDeprecationWarning)
        server = _Server(  # the overload with on_set_logging_level is deprecated (handshake era)
            "toolwise",
            version=__version__,
            instructions=INSTRUCTIONS if app.exposure.mode == "all" else INSTRUCTIONS + SEARCH_INSTRUCTIONS,
            lifespan=lambda _server: contextlib.nullcontext(app),
            on_list_tools=on_list_tools,
            on_call_tool=on_call_tool,
            on_subscriptions_listen=passthrough.subscriptions.listen,
            on_list_resources=passthrough.list_resources,
            on_list_resource_templates=passthrough.list_resource_templates,
            on_read_resource=passthrough.read_resource,
            on_subscribe_resource=passthrough.subscriptions.subscribe_resource,
            on_unsubscribe_resource=passthrough.subscriptions.unsubscribe_resource,
            on_list_prompts=passthrough.list_prompts,
            on_get_prompt=passthrough.get_prompt,
            on_completion=passthrough.complete,
            on_set_logging_level=passthrough.callers.set_logging_level,
        )
    server.offered = passthrough.catalogue.capabilities
    # In place of the SDK's span middleware (`Server.middleware`, provisional in the SDK: its TODO L54):
    # ours, a SERVER span per request, when tracing is on; else none.
    server.middleware = middleware(app.tracing)
    return server


class _Server(Server[Toolwise]):
    """Announces `tools.listChanged` to handshake-era clients on every transport (the HTTP session
    manager builds its initialization options itself, without notification options), and besides
    tools only what its downstreams offer (`offered`: the union of their capabilities)."""

    offered: Callable[..., dict[str, Any]] | None = None  # `build_server` sets the catalogue's union

    def get_capabilities(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
        *,
        protocol_version: str | None = None,
    ) -> types.ServerCapabilities:
        if notification_options is None and protocol_version not in MODERN_PROTOCOL_VERSIONS:
            notification_options = NotificationOptions(tools_changed=True)
        caps = super().get_capabilities(
            notification_options, experimental_capabilities, extensions, protocol_version=protocol_version
        )
        handshake = protocol_version not in MODERN_PROTOCOL_VERSIONS
        offered = self.offered(handshake=handshake) if self.offered is not None else {}
        update: dict[str, Any] = {name: None for name in PASSED_THROUGH if name not in offered}
        for name in ("logging", "completions"):
            if name in offered:
                update[name] = offered[name]
        if "resources" in offered and handshake:
            update["resources"] = offered["resources"]
        if "prompts" in offered and handshake:
            update["prompts"] = offered["prompts"]
        return caps.model_copy(update=update)

    def create_initialization_options(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        return super().create_initialization_options(
            notification_options or NotificationOptions(tools_changed=True), experimental_capabilities, extensions
        )
