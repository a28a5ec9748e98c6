"""Charts of the dashboard as inline SVG, drawn here: a page needs no script library and no build step,
and a chart is as cheap to serve as the numbers it shows."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from html import escape

WIDTH, HEIGHT = 300, 150  # the SVG's own units; the page scales it to its column
LEFT, RIGHT, TOP, BOTTOM = 40, 8, 24, 22  # room for the axis labels and the title


@dataclass(frozen=True, slots=True)
class Point:
    """One slice of time and its value (None: nothing to show in it, the line breaks)."""

    start: datetime
    end: datetime
    value: float | None
    calls: int = 0


def _when(moment: datetime, span_s: float) -> str:
    if span_s < 600:
        return f"{moment:%H:%M:%S}"
    return f"{moment:%H:%M}" if span_s < 86400 else f"{moment:%m-%d %H:%M}"


def _frame(title: str, ticks: Sequence[tuple[float, str]], points: Sequence[Point]) -> list[str]:
    """The title, the horizontal grid with its labels, and the first and last time under the plot."""
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
        f'aria-label="{escape(title)}" class="chart">',
        f'<text x="2" y="14" class="title">{escape(title)}</text>',
    ]
    for y, label in ticks:
        parts.append(f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y:.1f}" y2="{y:.1f}" class="grid"/>')
        parts.append(f'<text x="{LEFT - 4}" y="{y + 4:.1f}" text-anchor="end" class="axis">{escape(label)}</text>')
    if points:
        span = (points[-1].end - points[0].start).total_seconds()
        base = HEIGHT - 6
        parts.append(f'<text x="{LEFT}" y="{base}" class="axis">{_when(points[0].start, span)}</text>')
        end = _when(points[-1].end, span)
        parts.append(f'<text x="{WIDTH - RIGHT}" y="{base}" text-anchor="end" class="axis">{end} UTC</text>')
    return parts


def line_chart(title: str, points: Sequence[Point], *, low: float, high: float, label: Callable[[float], str]) -> str:
    """A line through `points` (one a slice, at its middle) on a fixed scale low..high: a rate between
    0 and 1 reads the same in every window. A slice without a value breaks the line."""
    inner_w, inner_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    high = high if high > low else low + 1

    def y_of(value: float) -> float:
        clipped = min(max(value, low), high)
        return TOP + inner_h * (1 - (clipped - low) / (high - low))

    ticks = [(y_of(v), label(v)) for v in (low, (low + high) / 2, high)]
    parts = _frame(title, ticks, points)
    if not points:
        parts.append(f'<text x="{WIDTH / 2}" y="{HEIGHT / 2}" text-anchor="middle" class="axis">no calls</text>')
        return "".join([*parts, "</svg>"])
    step = inner_w / len(points)
    runs: list[list[str]] = [[]]
    for i, p in enumerate(points):
        if p.value is None:
            runs.append([])
            continue
        x, y = LEFT + step * (i + 0.5), y_of(p.value)
        runs[-1].append(f"{x:.1f},{y:.1f}")
        tip = f"{p.start:%Y-%m-%d %H:%M}: {label(p.value)} ({p.calls} calls)"
        parts.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="2.5" class="dot"><title>{escape(tip)}</title></circle>')
    for run in runs:
        if len(run) > 1:
            parts.append(f'<polyline points="{" ".join(run)}" class="line"/>')
    return "".join([*parts, "</svg>"])


def bar_chart(title: str, points: Sequence[Point]) -> str:
    """Calls per slice as bars, scaled to the busiest slice."""
    inner_w, inner_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    most = max((p.calls for p in points), default=0) or 1
    ticks = [(TOP + inner_h, "0"), (TOP, f"{most:,}")]
    parts = _frame(title, ticks, points)
    step = inner_w / max(len(points), 1)
    for i, p in enumerate(points):
        h = inner_h * p.calls / most
        tip = f"{p.start:%Y-%m-%d %H:%M}: {p.calls:,} calls"
        parts.append(
            f'<rect x="{LEFT + step * i + 0.5:.1f}" y="{TOP + inner_h - h:.1f}" width="{max(step - 1, 0.5):.1f}" '
            f'height="{h:.1f}" class="bar"><title>{escape(tip)}</title></rect>'
        )
    return "".join([*parts, "</svg>"])
