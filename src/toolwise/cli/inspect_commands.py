"""`toolwise inspect …`: what toolwise learned, from the database (and its newest snapshot) alone; no
running server is needed. The views that read only the log (status, top-actions, compare, progress,
export, plot) import neither the MCP server nor the learning services: they start in the time the
interpreter, SQLAlchemy and the CLI take."""

from __future__ import annotations

import typer

from toolwise.cli.exports import inspect_export, inspect_plot
from toolwise.cli.policy_views import inspect_evaluate, inspect_qvalues
from toolwise.cli.reports import inspect_compare, inspect_progress, inspect_status, inspect_top_actions

inspect_app = typer.Typer(help="What toolwise learned, from its database.", no_args_is_help=True)
inspect_app.command("qvalues")(inspect_qvalues)
inspect_app.command("progress")(inspect_progress)
inspect_app.command("top-actions")(inspect_top_actions)
inspect_app.command("compare")(inspect_compare)
inspect_app.command("status")(inspect_status)
inspect_app.command("export")(inspect_export)
inspect_app.command("evaluate")(inspect_evaluate)
inspect_app.command("plot")(inspect_plot)
