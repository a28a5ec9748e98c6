"""Every page of what a downstream lists (the SDK lists one page a call), read fresh each time:
toolwise's own cache is the catalogue, kept up to date by list-change notifications."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol, TypeVar

import mcp_types as types
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp_types.jsonrpc import METHOD_NOT_FOUND

T = TypeVar("T")
P = TypeVar("P", bound="_Page")


class _Page(Protocol):
    @property
    def next_cursor(self) -> str | None: ...


async def _every_page(fetch: Callable[[str | None], Awaitable[P]], items: Callable[[P], Sequence[T]]) -> list[T]:
    listed: list[T] = []
    cursor = None
    while True:
        page = await fetch(cursor)
        listed.extend(items(page))
        if not (cursor := page.next_cursor):
            return listed


async def all_tools(client: Client) -> list[types.Tool]:
    return await _every_page(lambda c: client.list_tools(cursor=c, cache_mode="refresh"), lambda p: p.tools)


async def all_resources(client: Client) -> list[types.Resource]:
    return await _every_page(lambda c: client.list_resources(cursor=c, cache_mode="refresh"), lambda p: p.resources)


async def all_prompts(client: Client) -> list[types.Prompt]:
    return await _every_page(lambda c: client.list_prompts(cursor=c, cache_mode="refresh"), lambda p: p.prompts)


async def all_templates(client: Client) -> list[types.ResourceTemplate]:
    """Its resource templates; none when it does not serve templates (a server with resources need not)."""
    try:
        return await _every_page(
            lambda c: client.list_resource_templates(cursor=c, cache_mode="refresh"), lambda p: p.resource_templates
        )
    except MCPError as exc:
        if exc.code != METHOD_NOT_FOUND:
            raise
        return []
