"""The dashboard over HTTP, in process: the token (a bearer header, or once in the address for a
cookie), the tools called by name, sorting by a column, the learning curve, health and sessions."""

from __future__ import annotations

import re
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx2 as httpx  # the SDK's HTTP client (an mcp dependency), with its ASGI transport
import pytest
from pydantic import SecretStr
from sqlalchemy import event

from tests.feedback.conftest import make_execution
from tests.server.dashboard_log import DRIFT, TOOLS, fill
from toolwise.config import Settings
from toolwise.feedback import FeedbackService, utcnow
from toolwise.feedback.records import REQUEST_PREFIX, new_id
from toolwise.server import dashboard, dashboard_page
from toolwise.server.auth import DASHBOARD_COOKIE, http_access
from toolwise.server.dashboard import Chain, Step
from toolwise.server.dashboard_http import dashboard_app

TOKEN = "dashboard-token-for-tests-0123"
BEARER = {"Authorization": f"Bearer {TOKEN}"}


@asynccontextmanager
async def dashboard_on(url: str, namespace: str = "default") -> AsyncIterator[httpx.AsyncClient]:
    """A client of the dashboard over `namespace` of the database at `url`, once `fill` has filled it."""
    await fill(url, namespace)
    access = http_access("127.0.0.1", Settings(http_token=SecretStr(TOKEN)))
    async with FeedbackService(url) as feedback:
        app = dashboard_app(feedback, namespace, url, access)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
            yield http


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    async with dashboard_on(f"sqlite+aiosqlite:///{tmp_path / 'toolwise.db'}") as http:
        yield http


def tool_order(html: str) -> list[str]:
    """The tools table's rows, top to bottom."""
    return re.findall(r'<td class="name" title="([^"]+)"', html)


async def test_the_dashboard_needs_the_token(client: httpx.AsyncClient) -> None:
    refused = await client.get("/dashboard")
    assert refused.status_code == 401 and "?token=" in refused.text
    assert (await client.get("/dashboard", headers={"Authorization": "Bearer not-" + TOKEN})).status_code == 401
    assert (await client.get("/dashboard?token=not-" + TOKEN)).status_code == 401
    assert (await client.get("/dashboard", headers=BEARER)).status_code == 200


async def test_the_token_in_the_address_sets_a_cookie_for_the_dashboard_only(client: httpx.AsyncClient) -> None:
    answer = await client.get(f"/dashboard?token={TOKEN}&sort=tool")
    assert answer.status_code == 303 and answer.headers["location"] == "/dashboard?sort=tool"
    cookie = answer.headers["set-cookie"]
    for attribute in ("HttpOnly", "SameSite=strict", "Path=/dashboard"):
        assert attribute in cookie
    assert TOKEN not in cookie  # an HMAC of it: the cookie is no bearer token
    value = answer.cookies[DASHBOARD_COOKIE]
    client.cookies.set(DASHBOARD_COOKIE, value)
    page = await client.get("/dashboard?sort=tool")
    assert page.status_code == 200 and "time__get_current_time" in page.text
    assert (await client.get("/mcp", headers={"Authorization": f"Bearer {value}"})).status_code == 401
    client.cookies.set(DASHBOARD_COOKIE, "0" * 64)
    assert (await client.get("/dashboard")).status_code == 401


async def test_a_foreign_host_is_refused(client: httpx.AsyncClient) -> None:
    assert (await client.get("/dashboard", headers={**BEARER, "Host": "evil.example"})).status_code == 421


async def test_the_page_names_every_tool_called_with_charts_health_and_sessions(client: httpx.AsyncClient) -> None:
    page = (await client.get("/dashboard", headers=BEARER)).text
    assert set(tool_order(page)) == set(TOOLS)
    assert page.count("<svg") == 5 and "learning curve" in page
    assert "search: ready, circuit open" in page and "open: search" in page  # the downstream and its circuit
    assert DRIFT.replace("→", "&rarr;") in page or "rewards fell at call 120" in page
    assert "session-0" in page and "success, reward 40.0" in page  # an ended session with its outcome
    chain = re.search(r"session-4.*?</div>", page, re.S)
    assert chain is not None and chain.group().index("search__web_search") < chain.group().index("alpha__zeta_tool")


def test_a_request_on_no_connection_is_shown_as_one_request_not_as_an_open_session() -> None:
    """Over 2026-07-28 HTTP a call that names no session is a session of its own, over with its answer: the
    dashboard listed each such call as an "open" session that would never end."""
    now = utcnow()
    alone = Chain(f"client/{REQUEST_PREFIX}{new_id()}", [Step("time__get_current_time", True, 10.0)], now, None, None)
    named = Chain("client/request-42", [Step("time__get_current_time", True, 10.0)], now, None, None)
    shown = [re.search(r'class="muted">(one request|open)<', dashboard_page._sessions([c])) for c in (alone, named)]
    assert [m.group(1) if m else None for m in shown] == ["one request", "open"]


async def test_a_column_header_sorts_the_tools(client: httpx.AsyncClient) -> None:
    by_calls = (await client.get("/dashboard", headers=BEARER)).text
    assert tool_order(by_calls) == sorted(TOOLS, key=lambda t: -TOOLS[t][0])
    assert 'href="/dashboard?sort=latency&amp;order=desc&amp;window=24h"' in by_calls  # the header's link
    by_name = (await client.get("/dashboard?sort=tool&order=asc", headers=BEARER)).text
    assert tool_order(by_name) == sorted(TOOLS)
    slowest = (await client.get("/dashboard?sort=latency&order=desc", headers=BEARER)).text
    assert tool_order(slowest) == sorted(TOOLS, key=lambda t: -TOOLS[t][2])
    worst = (await client.get("/dashboard?sort=success&order=asc", headers=BEARER)).text
    assert tool_order(worst)[0] == "search__web_search"
    wrong = await client.get("/dashboard?sort=colour", headers=BEARER)
    assert wrong.status_code == 400 and "sort must be one of" in wrong.text


async def test_an_open_page_fetches_its_main_part_again(client: httpx.AsyncClient) -> None:
    page = (await client.get("/dashboard", headers=BEARER)).text
    assert "setInterval" in page and "part" in page
    part = (await client.get("/dashboard?part=main", headers=BEARER)).text
    assert "<html" not in part and "<svg" in part and "time__get_current_time" in part


async def test_a_window_with_more_calls_than_the_trend_reads_says_which_it_shows(
    client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    whole = (await client.get("/dashboard", headers=BEARER)).text
    assert "its newest" not in whole
    assert sum(map(int, re.findall(r"(\d+) calls</title></rect>", whole))) == 21  # every call in the window
    for module in (dashboard, dashboard_page):
        monkeypatch.setattr(module, "TREND_ROWS", 5)
    capped = (await client.get("/dashboard", headers=BEARER)).text
    assert "its newest 5 calls, since" in capped
    assert sum(map(int, re.findall(r"(\d+) calls</title></rect>", capped))) == 5


async def test_the_dashboard_reads_a_shared_postgresql(pg_url: str) -> None:
    async with dashboard_on(pg_url, f"test-{uuid.uuid4().hex[:8]}") as client:
        page = (await client.get("/dashboard?sort=latency&order=desc", headers=BEARER)).text
    assert tool_order(page) == sorted(TOOLS, key=lambda t: -TOOLS[t][2])
    assert sum(map(int, re.findall(r"(\d+) calls</title></rect>", page))) == 21
    assert "search: ready, circuit open" in page and "session-4" in page


async def test_calls_another_process_records_show_at_the_next_refresh(
    client: httpx.AsyncClient, tmp_path: Path
) -> None:
    for _ in range(2):  # the metrics read and cached while the log stands still
        assert "other__tool" not in (await client.get("/dashboard?part=main", headers=BEARER)).text
    async with FeedbackService(f"sqlite+aiosqlite:///{tmp_path / 'toolwise.db'}") as elsewhere:
        await elsewhere.log.record_execution(make_execution("other__tool"))
    assert "other__tool" in tool_order((await client.get("/dashboard?part=main", headers=BEARER)).text)


async def test_a_database_that_fails_is_said_on_the_page_not_a_traceback(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The database fails under the open dashboard (its file overwritten, a disk failing): the page
    answers 503 naming the database's error, not a bare 500 with a traceback in the log."""
    db = tmp_path / "toolwise.db"
    async with dashboard_on(f"sqlite+aiosqlite:///{db}") as http:
        assert (await http.get("/dashboard", headers=BEARER)).status_code == 200
        db.write_bytes(b"not a database file " * 400)
        failed = await http.get("/dashboard?part=main", headers=BEARER)
    assert failed.status_code == 503 and "the database is failing" in failed.text, failed.text
    assert not [r for r in caplog.records if r.exc_info]


async def test_the_page_reads_a_bounded_number_of_instance_rows(tmp_path: Path) -> None:
    """Every start leaves its row in `instances` and nothing removes them: the page shows the newest
    `INSTANCES` and reads no more (it read every row of the namespace at each refresh of an open page)."""
    url = f"sqlite+aiosqlite:///{tmp_path / 'toolwise.db'}"
    await fill(url, "default")
    read: list[str] = []

    def note(conn: object, cursor: object, statement: str, *rest: object) -> None:
        if "FROM instances" in statement:
            read.append(" ".join(statement.split()))

    access = http_access("127.0.0.1", Settings(http_token=SecretStr(TOKEN)))
    async with FeedbackService(url) as feedback:
        event.listen(feedback.database.engine.sync_engine, "before_cursor_execute", note)
        transport = httpx.ASGITransport(app=dashboard_app(feedback, "default", url, access))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
            page = await http.get("/dashboard?part=main", headers=BEARER)
    assert page.status_code == 200 and "testhost" in page.text
    assert read and all(s.endswith("LIMIT ? OFFSET ?") for s in read), read
