"""`toolwise dashboard` opened in a real browser: Debian's chromium, headless, follows the printed
address (the token once, then the cookie it sets), runs the page and draws it; the screenshot is left
in the test's folder. Skipped without chromium, except in CI (CI=true), where `.ci/run` installs it."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.e2e.conftest import BIN
from tests.server.dashboard_log import TOOLS, fill

TOKEN = "browser-test-token-0123456789"
HEADLESS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1366,900",
]


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        reason = "no chromium on PATH (apt-get install chromium)"
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true but {reason}")
        pytest.skip(reason)
    return found


@contextmanager
def dashboard(config: Path, url: str) -> Iterator[str]:
    """`toolwise dashboard` on any free port; yields the address it prints (never the token), with the
    token added as a user would once."""
    command = [str(BIN / "toolwise"), "dashboard", "-c", str(config), "--database-url", url, "--port", "0"]
    proc = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ, "TOOLWISE_HTTP_TOKEN": TOKEN}
    )
    try:
        assert proc.stdout is not None
        address = proc.stdout.readline().decode().strip()
        assert address.startswith("http://127.0.0.1:") and address.endswith("/dashboard"), address
        port = int(address.split(":")[2].split("/")[0])
        for _ in range(300):
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.1):
                    break
            except OSError:
                assert proc.poll() is None, proc.stderr.read().decode()[-2000:]  # type: ignore[union-attr]
                time.sleep(0.1)
        yield f"{address}?token={TOKEN}"
    finally:
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 0, stderr.decode()[-2000:]


def browse(browser: str, profile: Path, *args: str) -> str:
    done = subprocess.run(
        [browser, *HEADLESS, f"--user-data-dir={profile}", *args], capture_output=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    return done.stdout.decode()


async def test_a_browser_shows_the_tools_called_and_the_charts(
    tmp_path: Path, write_config: Callable[..., Path]
) -> None:
    browser = chromium()
    url = f"sqlite+aiosqlite:///{tmp_path / 'toolwise.db'}"
    await fill(url)
    screenshot = tmp_path / "dashboard.png"
    with dashboard(write_config({}), url) as address:
        dom = await asyncio.to_thread(browse, browser, tmp_path / "profile", "--dump-dom", address)
        await asyncio.to_thread(browse, browser, tmp_path / "profile-2", f"--screenshot={screenshot}", address)
    print(f"dashboard screenshot: {screenshot}")
    assert "needs the token" not in dom
    assert set(re.findall(r'<td class="name" title="([^"]+)"', dom)) == set(TOOLS)
    assert dom.count("<svg") == 5 and "<polyline" in dom
    assert screenshot.stat().st_size > 20_000  # a page drawn, not a blank window
