"""`toolwise inspect qvalues` and recommend_tool print one confidence for one learned state: here where the
agent's first tool for a request was seen to fail there and gives way to a tool that fits clearly better
across requests (the outcome policy's replacement, rl/policies/outcome.py), whose confidence is read with
that fit. A real SQLite file: the state saved as a snapshot, as `toolwise serve` leaves it."""

from __future__ import annotations

import asyncio
from pathlib import Path

import mcp_types as types
from typer.testing import CliRunner

from tests.cli.test_views import cli_config
from tests.rl.test_across import CATALOGUE, REQUEST, fits_here
from toolwise.cli.main import app as cli
from toolwise.config import Settings
from toolwise.downstream.errors import CallCancelledError
from toolwise.downstream.outcome import CallOutcome
from toolwise.feedback import FeedbackService, utcnow
from toolwise.learning.sessions import Session
from toolwise.rl.policies import OutcomeModel
from toolwise.server.recommend import RecommendToolInput, recommend_tool
from toolwise.server.services import Services

TOOLS = [types.Tool(name=d.name, description=d.description, input_schema={"type": "object"}) for d in CATALOGUE]


async def replaced_first(url: str) -> tuple[str, float]:
    """A state whose recommendation for REQUEST puts first a tool that fits across requests in place of the
    agent's first, seen to fail there; saved as a snapshot. That tool and the confidence recommend_tool reports."""
    async with FeedbackService(url, flush_interval_ms=1) as feedback:
        services = Services.open(Settings(database_url=url, seed=5, sync_interval_s=0), feedback)
        await services.learning.set_tools(TOOLS)
        learning, learner = services.learning, services.learning.learner
        logged = learning.sessions.get("logged")  # the request in the log (its call cancelled: not learned)
        await services.agent.recommend(logged, REQUEST, 4, None)
        learning.note(
            logged,
            tool=CATALOGUE[0].name,
            server="tools",
            arguments=None,
            outcome=CallOutcome(CallCancelledError.__name__, "cancelled"),
            started_at=utcnow(),
            latency_ms=20.0,
        )
        await learning.drain()
        order = [r.tool for r in learner.recommend(REQUEST, learning.state.rng, top_k=4).ranked]
        policy = learner.policy
        assert isinstance(policy, OutcomeModel)
        x = policy.choice.features(learner.encode(REQUEST, None, 0))
        policy.memory.add(learner.index.tools.intern(order[0]), x, 0.0, 1.0)  # the agent's first failed here
        fits_here(learner, order[3])
        await services.snapshots.save("periodic")
        output = await recommend_tool(services, RecommendToolInput(query=REQUEST, top_k=4), Session("asked"))
        await learning.aclose()
    first = output.recommendations[0]
    assert first.tool == order[3], f"{first.tool} first, not {order[3]}: the replacement did not happen"
    return first.tool, first.confidence


def test_inspect_qvalues_prints_the_confidence_recommend_tool_reports_of_a_tool_put_first_across_requests(
    tmp_path: Path,
) -> None:
    url, config = cli_config(tmp_path)
    tool, confidence = asyncio.run(replaced_first(url))
    result = CliRunner().invoke(cli, ["inspect", "qvalues", *config, "--tool", tool, "--wide"])
    assert result.exit_code == 0, result.output
    [row] = [line for line in result.output.splitlines() if REQUEST in line]
    cells = [cell.strip() for cell in row.split("│")[1:-1]]
    assert cells[3] == tool
    assert cells[4] == f"{confidence:.3f}", f"inspect shows {cells[4]}, recommend_tool reported {confidence:.3f}"
