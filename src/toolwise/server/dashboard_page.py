"""The dashboard's HTML, rendered on the server: one page with its style inline, charts as inline SVG
(`charts.py`), and a few lines of script that fetch the page's main part again every few seconds (a
page without script refreshes itself whole). Every value from the log is escaped."""

from __future__ import annotations

import math
from html import escape

from toolwise.feedback.instances import liveness
from toolwise.feedback.records import one_request
from toolwise.server.charts import Point, bar_chart, line_chart
from toolwise.server.dashboard import REFRESH_S, TREND_ROWS, WINDOWS, Chain, Query, Step, ToolRow, View

TOOL_ROWS = 100  # the table shows the first this many tools in the order asked for
CHAIN_STEPS = 12  # a session shows its newest this many calls

STYLE = """
body{font:13px/1.4 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;background:#f6f7f9;color:#1f2328}
header{background:#1f2937;color:#f9fafb;padding:8px 18px;display:flex;gap:18px;align-items:baseline;flex-wrap:wrap}
header h1{font-size:16px;margin:0}header a{color:#93c5fd}header .muted{color:#cbd5e1}
main{padding:10px 18px;display:grid;gap:12px}
section{background:#fff;border:1px solid #d8dee4;border-radius:6px;padding:8px 12px}
h2{font-size:14px;margin:0 0 6px}
.cols{display:grid;grid-template-columns:minmax(0,2fr) minmax(0,1fr);gap:12px}section{overflow-x:auto}
.charts{display:grid;grid-template-columns:repeat(auto-fill,minmax(240px,1fr));gap:8px}
.chart{width:100%;height:auto}.chart .title{font-size:13px;font-weight:600;fill:#1f2328}
.chart .axis{font-size:11px;fill:#57606a}.chart .grid{stroke:#eaeef2}
.chart .line{fill:none;stroke:#2563eb;stroke-width:1.8}.chart .dot{fill:#2563eb}.chart .bar{fill:#93c5fd}
table{border-collapse:collapse;width:100%}th,td{padding:3px 6px;text-align:right;white-space:nowrap}
th{border-bottom:2px solid #d8dee4;font-weight:600}td{border-bottom:1px solid #eaeef2}
th:first-child,td:first-child{text-align:left}
th a{color:inherit;text-decoration:none}th a:hover{text-decoration:underline}
td.name{max-width:280px;overflow:hidden;text-overflow:ellipsis}
.ok{color:#1a7f37}.bad{color:#cf222e}.warn{color:#9a6700}.muted{color:#57606a}
.chip{display:inline-block;padding:0 6px;margin:1px 0;border-radius:10px;font-size:12px;border:1px solid}
.chip.ok{background:#dafbe1;border-color:#aceebb}.chip.bad{background:#ffebe9;border-color:#ffcecb}
.chip.warn{background:#fff8c5;border-color:#eac54f}.arrow{color:#8c959f;margin:0 2px}
ul{margin:4px 0;padding-left:18px}.session{padding:4px 0;border-bottom:1px solid #eaeef2}
"""

SCRIPT = f"""
setInterval(async () => {{
  if (document.hidden) return;
  const url = new URL(location.href); url.searchParams.set("part", "main");
  try {{
    const answer = await fetch(url, {{credentials: "same-origin", cache: "no-store"}});
    if (answer.ok) document.querySelector("main").innerHTML = await answer.text();
  }} catch (e) {{ console.warn("toolwise dashboard: refresh failed", e); }}
}}, {REFRESH_S * 1000});
"""


def page(view: View, query: Query) -> str:
    """The whole page."""
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        f"<title>toolwise — {escape(view.namespace)}</title><style>{STYLE}</style>"
        f'<noscript><meta http-equiv="refresh" content="{REFRESH_S * 2}"></noscript></head><body>'
        f"<main>{main_part(view, query)}</main><script>{SCRIPT}</script></body></html>"
    )


def main_part(view: View, query: Query) -> str:
    """What an open page fetches again to stay live: everything but the page's frame."""
    return "".join(
        [
            _header(view, query),
            f"<section><h2>Served</h2>{_health(view)}</section>",
            f"<section><h2>Learning, last {query.window}{_capped(view)}</h2>{_charts(view)}</section>",
            f'<div class="cols"><section><h2>Tools</h2>{_tools(view.tools, query)}</section>',
            f"<section><h2>Recent sessions</h2>{_sessions(view.sessions)}</section></div>",
        ]
    )


def _header(view: View, query: Query) -> str:
    windows = " ".join(
        f"<b>{w}</b>" if w == query.window else f'<a href="{escape(query.link(window=w))}">{w}</a>' for w in WINDOWS
    )
    return (
        f"<header><h1>toolwise</h1><span>namespace <b>{escape(view.namespace)}</b></span>"
        f'<span class="muted">{escape(view.database)}</span><span>{view.executions:,} executions</span>'
        f"<span>snapshot {escape(view.snapshot)}</span><span>window {windows}</span>"
        f'<span class="muted">read {view.now:%Y-%m-%d %H:%M:%S} UTC in {view.took_ms:.0f} ms</span></header>'
    )


def _health(view: View) -> str:
    if not view.instances:
        return '<p class="muted">No toolwise instance has reported to this database.</p>'
    rows, alarms = [], []
    for i in view.instances:
        s = i.status
        kind, words = liveness(i, view.now)
        state = f'<span class="{ {"alive": "ok", "stale": "bad", "stopped": "muted"}[kind] }">{escape(words)}</span>'
        if s.get("store", "ok") != "ok":
            state += f' <span class="bad">store {escape(str(s["store"]))}</span>'
        downstreams = " ".join(_downstream(d) for d in s.get("downstreams", [])) or '<span class="muted">none</span>'
        circuits = ", ".join(map(str, s.get("open_circuits", [])))
        rows.append(
            f"<tr><td>{escape(i.id[:8])}</td><td>{escape(i.host)}/{i.pid}</td><td>{state}</td>"
            f"<td>{escape(str(s.get('serving', '?')))}</td><td>{escape(str(s.get('policy', '?')))}</td>"
            f'<td style="text-align:left;white-space:normal">{downstreams}</td>'
            f"<td>{f'<span class=bad>open: {escape(circuits)}</span>' if circuits else 'all closed'}</td>"
            f"<td>{int(s.get('calls', 0)):,}</td><td>{float(s.get('epsilon', 0.0)):.3f}</td></tr>"
        )
        if kind == "alive":
            if s.get("epsilon_reason"):
                alarms.append(f"<li>{escape(i.id[:8])} exploration: {escape(str(s['epsilon_reason']))}</li>")
            alarms += [f'<li class="warn">{escape(i.id[:8])} drift: {escape(str(d))}</li>' for d in s.get("drifts", [])]
    head = "".join(
        f"<th>{h}</th>" for h in ("instance", "host/pid", "state", "serving", "policy", "downstreams", "circuits")
    )
    table = f"<table><tr>{head}<th>calls</th><th>ε</th></tr>{''.join(rows)}</table>"
    listed = "".join(alarms) or '<li class="muted">no drift seen by a running instance</li>'
    return f"{table}<h2 style='margin-top:8px'>Exploration and drift alarms</h2><ul>{listed}</ul>"


def _downstream(d: dict[str, object]) -> str:
    state, circuit = str(d.get("state", "?")), str(d.get("circuit", "closed"))
    kind = "ok" if state == "ready" and circuit == "closed" else "bad" if circuit == "open" else "warn"
    extra = f", circuit {circuit}" if circuit != "closed" else ""
    title = escape(str(d.get("error") or f"{d.get('tools', 0)} tools, {d.get('restarts', 0)} restarts"))
    return (
        f'<span class="chip {kind}" title="{title}">{escape(str(d.get("server", "?")))}: {escape(state)}{extra}</span>'
    )


def _capped(view: View) -> str:
    """What the trend covers when the window holds more calls than it reads."""
    if not view.trend_capped or not view.trend:
        return " (per slice of time)"
    return f" (per slice of time): its newest {TREND_ROWS:,} calls, since {view.trend[0].start:%Y-%m-%d %H:%M} UTC"


def _percent(value: float) -> str:
    return f"{value:.0%}"


def _charts(view: View) -> str:
    trend = view.trend

    def points(values: list[float | None]) -> list[Point]:
        return [Point(b.start, b.end, v, b.calls) for b, v in zip(trend, values, strict=True)]

    rewards = [b.mean_reward for b in trend]
    known = [r for r in rewards if r is not None]
    low, high = math.floor(min([0.0, *known])), math.ceil(max([1.0, *known]))
    charts = [
        line_chart(
            "calls of toolwise's pick (learning curve)",
            points([b.followed_rate for b in trend]),
            low=0,
            high=1,
            label=_percent,
        ),
        line_chart("mean reward", points(list(rewards)), low=low, high=high, label=lambda v: f"{v:.1f}"),
        line_chart("success rate", points([b.success_rate for b in trend]), low=0, high=1, label=_percent),
        line_chart("exploration rate", points([b.exploration_rate for b in trend]), low=0, high=1, label=_percent),
        bar_chart("calls", points([None] * len(trend))),
    ]
    return f'<div class="charts">{"".join(charts)}</div>'


COLUMNS = [  # (sort key, header)
    ("tool", "tool"),
    ("calls", "calls"),
    ("success", "success"),
    ("latency", "mean ms"),
    ("p95", "p95 ms"),
    ("reward", "reward"),
    ("explored", "explored"),
    ("rating", "rating"),
    ("last_used", "last used"),
]


def _tools(tools: list[ToolRow], query: Query) -> str:
    if not tools:
        return '<p class="muted">No calls recorded yet.</p>'
    head = []
    for key, label in COLUMNS:
        if key == query.sort:
            arrow, order = ("▼", "asc") if query.descending else ("▲", "desc")
            head.append(f'<th aria-sort="{"descending" if query.descending else "ascending"}">'
                        f'<a href="{escape(query.link(sort=key, order=order))}">{label} {arrow}</a></th>')  # fmt: skip
        else:
            order = "asc" if key == "tool" else "desc"
            head.append(f'<th><a href="{escape(query.link(sort=key, order=order))}">{label}</a></th>')
    most = max(t.calls for t in tools)
    rows = []
    for t in tools[:TOOL_ROWS]:
        share = 100 * t.calls / most
        success = "ok" if t.success_rate >= 0.9 else "warn" if t.success_rate >= 0.6 else "bad"
        rows.append(
            f'<tr><td class="name" title="{escape(t.tool)}">{escape(t.tool)}</td>'
            f'<td style="background:linear-gradient(270deg,#dbeafe {share:.0f}%,transparent {share:.0f}%)">'
            f'{t.calls:,}</td><td class="{success}">{t.success_rate:.0%}</td>'
            f"<td>{t.avg_latency_ms:,.0f}</td><td>{t.p95_latency_ms:,.0f}</td>"
            f"<td>{'-' if t.mean_reward is None else f'{t.mean_reward:.2f}'}</td><td>{t.explored:,}</td>"
            f"<td>{'-' if t.avg_rating is None else f'{t.avg_rating:.1f}'}</td>"
            f"<td>{'-' if t.last_used is None else f'{t.last_used:%m-%d %H:%M}'}</td></tr>"
        )
    more = f'<p class="muted">the first {TOOL_ROWS} of {len(tools):,} tools</p>' if len(tools) > TOOL_ROWS else ""
    return f"<table><tr>{''.join(head)}</tr>{''.join(rows)}</table>{more}"


def _step(s: Step) -> str:
    reward = "-" if s.reward is None else f"{s.reward:.1f}"
    outcome = "succeeded" if s.success else "failed"
    return (
        f'<span class="chip {"ok" if s.success else "bad"}" title="{outcome}; reward {reward}">{escape(s.tool)}</span>'
    )


def _short(session_id: str) -> str:
    """A session id that fits its line: a long one (a connection's UUID) keeps its head and its tail."""
    return session_id if len(session_id) <= 24 else f"{session_id[:12]}…{session_id[-8:]}"


def _sessions(chains: list[Chain]) -> str:
    if not chains:
        return '<p class="muted">No sessions yet.</p>'
    out = []
    for c in chains:
        steps = c.steps[-CHAIN_STEPS:]
        earlier = (
            f'<span class="muted">… {len(c.steps) - len(steps)} earlier</span> ' if len(c.steps) > len(steps) else ""
        )
        chips = '<span class="arrow">→</span>'.join(map(_step, steps))
        ended = (
            f' <span class="chip {"ok" if c.outcome == "success" else "warn"}">{escape(c.outcome)}'
            f"{'' if c.total_reward is None else f', reward {c.total_reward:.1f}'}</span>"
            if c.outcome
            else f' <span class="muted">{"one request" if one_request(c.session_id) else "open"}</span>'
        )
        out.append(
            f'<div class="session"><span class="muted" title="{escape(c.session_id)}">{escape(_short(c.session_id))}'
            f" · {c.last:%H:%M:%S}</span>{ended}<br>{earlier}{chips}</div>"
        )
    return "".join(out)
