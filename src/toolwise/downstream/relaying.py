"""Where a downstream's notifications and requests go besides tools: the `Relay` (`downstream/passthrough.py`
is one), and on the 2026-07-28 era the `subscriptions/listen` stream that brings list changes."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any, Protocol

from mcp import Client
from mcp.client.subscriptions import SubscriptionLost
from mcp.shared.subscriptions import ToolsListChanged, event_to_notification
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

log = logging.getLogger(__name__)


class Relay(Protocol):
    """Where a downstream's notifications and requests go besides tools (`downstream/passthrough.py`)."""

    async def notified(self, server: str, message: Any) -> None: ...

    def client_callbacks(self, server: str) -> dict[str, Any]: ...

    def reconnected(self, server: str, *, twin: bool = False) -> None:
        """`server` is up on a new connection (`twin`: only its handshake-era twin was lost, `twin.py`, and is
        opened anew on need): what was made on the one before (subscriptions) is gone."""
        ...


def listener(
    server: str,
    client: Client,
    refresh: Callable[[Client], Coroutine[Any, Any, None]],
    relay: Relay | None,
    lost: Callable[[], None],
) -> asyncio.Task[None] | None:
    """On the 2026-07-28 era, list changes arrive on a `subscriptions/listen` stream: tool-list
    changes `refresh` the catalogue, the others go to the relay. A stream lost (the downstream restarted:
    a sessionless HTTP connection goes on) is `lost`: the connection is made anew, and the stream with it."""
    caps = client.server_capabilities
    if client.protocol_version not in MODERN_PROTOCOL_VERSIONS:
        return None
    tools = bool(caps.tools and caps.tools.list_changed)
    prompts = bool(caps.prompts and caps.prompts.list_changed and relay)
    resources = bool(caps.resources and caps.resources.list_changed and relay)
    if not (tools or prompts or resources):
        return None

    async def listen() -> None:
        try:
            async with client.listen(
                tools_list_changed=tools, prompts_list_changed=prompts, resources_list_changed=resources
            ) as subscription:
                async for event in subscription:
                    if isinstance(event, ToolsListChanged):
                        await refresh(client)
                    elif relay is not None:
                        await relay.notified(server, event_to_notification(event, {}))
        except SubscriptionLost:
            log.warning("downstream %s ended the stream of its list changes (it restarted?): reconnecting", server)
            lost()

    return asyncio.create_task(listen(), name=f"toolwise-listen-{server}")
