"""`toolwise inspect evaluate` and the `evaluate_policy` admin tool on a real SQLite log of decisions
logged uniformly at random (propensity ¼): a learning candidate is estimated well above the logged
policy, and a support rule the log cannot meet is refused with its numbers."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import numpy as np
from typer.testing import CliRunner

from tests.feedback.conftest import make_execution
from tests.server.surface import ok, serving, text
from toolwise.cli.main import app as cli
from toolwise.feedback import FeedbackService

QUERIES = [
    ("will it rain in Paris tomorrow", "kb__weather_forecast"),
    ("temperature and wind in Oslo", "kb__weather_forecast"),
    ("price of the AAPL stock ticker", "kb__stock_quote"),
    ("market quote for MSFT stock", "kb__stock_quote"),
    ("email my boss the report", "kb__send_email"),
    ("send an email to alice", "kb__send_email"),
    ("translate hello into German", "kb__translate_text"),
    ("translate this sentence to Spanish", "kb__translate_text"),
]
TOOLS = sorted({tool for _, tool in QUERIES})
DECISIONS = 400


async def fill(path: Path) -> None:
    """DECISIONS logged decisions, each a session's first call of a tool drawn uniformly (propensity ¼),
    succeeding 90% of the time with the right tool and 10% with another."""
    rng = np.random.default_rng(1)
    async with FeedbackService(f"sqlite+aiosqlite:///{path}") as feedback:
        for i in range(DECISIONS):
            query, right = QUERIES[int(rng.integers(len(QUERIES)))]
            tool = TOOLS[int(rng.integers(len(TOOLS)))]
            success = bool(rng.random() < (0.9 if tool == right else 0.1))
            execution = make_execution(
                tool,
                success=success,
                session_id=f"s{i}",
                query=query,
                decision_id=f"d{i}",
                propensity=0.25,
                reward=10.0 if success else -5.0,
            )
            await feedback.log.record_execution(execution)


def cli_config(tmp_path: Path) -> list[str]:
    asyncio.run(fill(tmp_path / "toolwise.db"))
    config = tmp_path / "toolwise.json"
    url = f"sqlite+aiosqlite:///{tmp_path / 'toolwise.db'}"
    config.write_text(json.dumps({"mcpServers": {}, "toolwise": {"database_url": url, "embedding": "none"}}))
    return ["--config", str(config)]


def test_inspect_evaluate_prints_the_estimates_next_to_the_logged_policys_reward(tmp_path: Path) -> None:
    config = cli_config(tmp_path)
    result = CliRunner().invoke(cli, ["inspect", "evaluate", "linucb", "--epsilon", "0.1", *config])
    assert result.exit_code == 0, result.output
    rows = {line.split("│")[1].strip(): line for line in result.output.splitlines() if line.count("│") >= 4}
    assert {"logged policy", "IPS", "SNIPS", "DR"} <= set(rows)
    logged = float(rows["logged policy"].split("│")[2])
    assert logged < 2.0 < float(rows["SNIPS"].split("│")[2])  # uniform logging earns little; learning earns more
    said = " ".join(result.output.split())  # the console wraps long lines
    assert f"{DECISIONS} logged decisions of 'default'" in said
    assert "intervals: normal approximation with the empirical variance" in said

    refused = CliRunner().invoke(cli, ["inspect", "evaluate", "linucb", "--min-matches", "5000", *config])
    assert refused.exit_code == 1
    said = " ".join(refused.output.split())
    assert "support is too thin" in said and "(need ≥ 5000)" in said


async def test_the_evaluate_policy_admin_tool_answers_through_an_mcp_client(tmp_path: Path) -> None:
    await fill(tmp_path / "toolwise.db")
    async with serving(tmp_path, embedding="none") as client:
        listed = {t.name for t in (await client.list_tools()).tools}
        found = ok(await client.call_tool("evaluate_policy", {"policy": "semantic", "epsilon": 0.1}))
        thin = await client.call_tool("evaluate_policy", {"policy": "semantic", "min_matches": 5000})
    assert "evaluate_policy" in listed
    assert found["decisions"] == DECISIONS and found["candidate"] == "semantic, ε=0.1, learning (replay)"
    assert found["logged"]["mean_reward"] < 2.0 < found["dr"]["mean_reward"]
    for name in ("ips", "snips", "dr"):
        assert found[name]["low"] < found[name]["mean_reward"] < found[name]["high"]
    assert thin.is_error and "(need ≥ 5000)" in text(thin)
