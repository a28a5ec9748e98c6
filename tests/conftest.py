"""Fixtures every test folder shares."""

from __future__ import annotations

import os

import pytest


@pytest.fixture
def pg_url() -> str:
    """The PostgreSQL server .ci/run starts; a test that asks for it is skipped, saying why, without one."""
    url = os.environ.get("TOOLWISE_TEST_PG_URL")
    if not url:
        pytest.skip("TOOLWISE_TEST_PG_URL is not set (.ci/run starts PostgreSQL and sets it)")
    return url
