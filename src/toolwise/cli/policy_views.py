"""`toolwise inspect qvalues` and `inspect evaluate`: the views that need the learning services (the
learned values; another policy replayed over the log), which they import only when one of them runs."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer
from pydantic import ValidationError

from toolwise.cli.common import ConfigOption, DatabaseUrlOption, WideOption
from toolwise.cli.database import current, run
from toolwise.config import Settings, describe
from toolwise.downstream.naming import meant
from toolwise.errors import UserError
from toolwise.rl.policy_names import POLICY_NAMES

if TYPE_CHECKING:
    from toolwise.feedback import FeedbackService

# The policies whose estimate recommend_tool reports as a probability (its `confidence`): what inspect calls it
CONFIDENCE = {
    "outcome": "the probability that a call of the tool works for the request",
    "choice": "the probability that the agent wants the tool, shrunk toward uniform by the calls learned",
}


def inspect_qvalues(
    config: ConfigOption = None,
    database_url: DatabaseUrlOption = None,
    tool: Annotated[str | None, typer.Option(help="Only this tool.")] = None,
    limit: Annotated[int, typer.Option(min=1, help="Rows to show.")] = 20,
    wide: WideOption = False,
) -> None:
    """Learned values per context seen in the log, best first.

    With the outcome and choice policies, the confidence recommend_tool reports; with the others Q, the
    expected reward rescaled to 0..1 by the reward's bounds, an estimate that can stray a little past them."""
    from toolwise.cli.console import console, print_fitted
    from toolwise.cli.views import Column
    from toolwise.server.recommend import Evidence, confidence_of

    async def work(settings: Settings, feedback: FeedbackService) -> None:
        from toolwise.learning.service import with_session_query

        learner = (await current(settings, feedback)).learning.learner
        policy = learner.policy.name
        if len(learner.index.active) == 0:  # the catalogue comes from a snapshot alone
            raise UserError(
                "no snapshot of the learned state holds the tools yet: `toolwise serve` saves one when it stops "
                f"and every snapshot_interval_s ({settings.snapshot_interval_s:g} s)"
            )
        recent = await feedback.reports.get_recent_executions(2000, namespace=settings.namespace)
        contexts: dict[str, tuple[str | None, str | None, int, dict[str, int]]] = {}
        for e in recent:
            e = await with_session_query(feedback, e, settings.namespace)  # noqa: PLW2901 - a query is stored once per session decision
            key = learner.encode(e.query, e.previous_tool, e.position).hash
            entry = contexts.setdefault(key, (e.query, e.previous_tool, e.position, {}))
            entry[3][e.tool] = entry[3].get(e.tool, 0) + 1
        rows, names = [], {e.tool for e in recent}
        evidence = Evidence(learner.updates, len(learner.index.active))  # as recommend_tool's, over every tool
        for key, (query, previous, position, counts) in contexts.items():
            for name, estimate, prior in learner.estimates(query, previous, position):
                value = confidence_of(policy, estimate, evidence) if policy in CONFIDENCE else estimate
                names.add(name)
                if (tool is None or name == tool) and (tool is not None or name in counts):
                    rows.append((value, key, query, previous, name, prior, counts.get(name, 0)))
        if tool is not None and tool not in names:
            raise UserError(f"no tool {tool!r} in the log{meant(tool, names)}")
        rows.sort(key=lambda r: -r[0])
        columns = [Column("context"), Column("query", "text"), Column("previous\ntool", "name"), Column("tool", "name")]
        shown = [
            [key[:8], (query or "")[:40], previous or "-", name, f"{value:.3f}", f"{prior:.2f}", str(n)]
            for value, key, query, previous, name, prior, n in rows[:limit]
        ]
        figure = "confidence" if policy in CONFIDENCE else "Q"
        print_fitted([*columns, Column(figure), Column("prior"), Column("calls")], shown, wide, "learned values")
        meaning = (
            f"confidence: {CONFIDENCE[policy]}, as recommend_tool reports it"
            if policy in CONFIDENCE
            else "Q: expected reward on 0..1 (an estimate: it can stray past 1)"
        )
        console.print(f"{policy}: {learner.updates} updates, {len(contexts)} contexts; {meaning}")

    run(config, work, database_url)


def inspect_evaluate(
    policy: Annotated[str, typer.Argument(help=f"The candidate policy ({', '.join(POLICY_NAMES)}).")],
    config: ConfigOption = None,
    database_url: DatabaseUrlOption = None,
    epsilon: Annotated[float | None, typer.Option(help="Another ε (default: the policy's).")] = None,
    prior_weight: Annotated[float | None, typer.Option(help="Another prior weight (default: the policy's).")] = None,
    frozen: Annotated[
        bool, typer.Option("--frozen", help="Learn the first TRAIN-FRACTION of the log, evaluate the rest.")
    ] = False,
    train_fraction: Annotated[float, typer.Option(min=0.01, max=0.99)] = 0.5,
    confidence: Annotated[float, typer.Option(min=0.5, max=0.999)] = 0.95,
    min_matches: Annotated[int | None, typer.Option(help="Refuse below this many matching decisions.")] = None,
    min_ess: Annotated[float | None, typer.Option(help="Refuse below this effective sample size.")] = None,
    max_unsupported: Annotated[
        float | None, typer.Option(help="Refuse above this fraction of certain decisions the candidate departs from.")
    ] = None,
    seed: int = 0,
) -> None:
    """Would another policy (ε, prior weight) have done better on the logged decisions?

    Its estimated mean reward (IPS, SNIPS, doubly robust) next to the logged policy's own, replayed in
    log order."""
    from rich.table import Table

    from toolwise.cli.console import console, waiting
    from toolwise.server.evaluation import EvaluateInput, evaluate_policy

    given = {"min_matches": min_matches, "min_ess": min_ess, "max_unsupported": max_unsupported}
    limits: dict[str, Any] = {k: v for k, v in given.items() if v is not None}  # EvaluateInput checks them

    async def work(settings: Settings, feedback: FeedbackService) -> None:
        from toolwise.learning.sessions import Session
        from toolwise.server.services import Services

        try:
            args = EvaluateInput(
                policy=policy,
                epsilon=epsilon,
                prior_weight=prior_weight,
                frozen=frozen,
                train_fraction=train_fraction,
                confidence=confidence,
                seed=seed,
                **limits,
            )
        except ValidationError as exc:  # an option out of its range (--epsilon 2): the user's to change
            raise UserError(f"inspect evaluate: {describe(exc)}") from exc
        services = Services.open(settings, feedback)
        await services.snapshots.load_latest()  # for the catalogue it knew: the evaluation replays the log itself
        with waiting() as progress:
            progress.add_task(f"replaying the log through {policy}", total=None)
            found = await evaluate_policy(services, args, Session("inspect"))
        level = f"{found.confidence:.0%} interval"
        table = Table("estimator", "mean reward", level, "std. error", title=found.candidate)
        for name, e in (("logged policy", found.logged), ("IPS", found.ips), ("SNIPS", found.snips), ("DR", found.dr)):
            table.add_row(name, f"{e.mean_reward:.3f}", f"[{e.low:.3f}, {e.high:.3f}]", f"{e.stderr:.3f}")
        console.print(table)
        console.print(
            f"{found.decisions} logged decisions of {found.namespace!r}, {found.matches} where the candidate "
            f"picked the logged tool, effective sample size {found.effective_sample_size:.1f}; "
            f"intervals: {found.interval}"
        )
        for note in found.notes():
            console.print(note)

    run(config, work, database_url)
