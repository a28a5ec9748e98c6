"""The `inspect` views on a large log, end to end (interpreter start-up included), next to a reference.

    python bench/views.py --database DB [--reference-bin BIN --reference-database DB2] [--rounds 3]
                          [--views status,top-actions,compare,progress,export,plot]

Runs each view as a user does (`toolwise inspect …` in a child process) on an SQLite file, and with
`--reference-bin` (another checkout's `toolwise` executable, on its own copy of the database, since a
newer schema is not an older code's) runs the same view there right after, round by round, so both
see the same load on a shared machine. Prints the median wall time, CPU time and peak RSS (the
child's own VmHWM) of each, and for the export its rows/s. `bench/scale.py --keep DIR` leaves a
database to use (copy it twice: one for each code).
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from scale import run_command

BIN = Path(sys.executable).parent / "toolwise"
VIEWS = {
    "status": ["status"],
    "top-actions": ["top-actions"],
    "compare": ["compare", "default", "elsewhere"],
    "progress": ["progress", "--hours", "9000"],
    "export": ["export", "--output", "{out}/export.jsonl"],
    "plot": ["plot", "--output", "{out}/curves.png"],
}


@dataclass
class Run:
    wall_s: float
    cpu_s: float
    peak_mb: float


def run(executable: Path, database: Path, args: list[str]) -> Run:
    """One `toolwise inspect …` in a child process: wall and CPU seconds (the child's user + system) and
    its peak RSS, sampled from /proc until it exits."""
    command = [str(executable), "inspect", *args, "--database-url", f"sqlite+aiosqlite:///{database}"]
    wall, peak_mb, cpu = run_command(command)
    return Run(wall, cpu, peak_mb)


def executions(database: Path) -> int:
    with sqlite3.connect(database) as conn:
        return int(conn.execute("SELECT count(*) FROM executions WHERE namespace = 'default'").fetchone()[0])


def median(runs: list[Run]) -> str:
    wall, cpu, peak = (statistics.median(getattr(r, f) for r in runs) for f in ("wall_s", "cpu_s", "peak_mb"))
    return f"{wall:.2f} s ({cpu:.2f} s CPU), {peak:.0f} MB"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database", type=Path, required=True)
    parser.add_argument("--reference-bin", type=Path)
    parser.add_argument("--reference-database", type=Path)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--views", default=",".join(VIEWS))
    args = parser.parse_args()
    if (args.reference_bin is None) != (args.reference_database is None):
        parser.error("--reference-bin and --reference-database go together")
    codes = [("this code", BIN, args.database)]
    if args.reference_bin is not None:
        codes.append(("reference", args.reference_bin, args.reference_database))
    rows = executions(args.database)
    results: dict[tuple[str, str], list[Run]] = {}
    with tempfile.TemporaryDirectory() as out:
        for view in args.views.split(","):
            command = [a.format(out=out) for a in VIEWS[view]]
            for _ in range(args.rounds):
                for name, executable, database in codes:
                    results.setdefault((view, name), []).append(run(executable, database, command))
    print(f"\nbench/views.py: `toolwise inspect` on {rows:,} executions, median of {args.rounds} (wall, CPU, peak)\n")
    print("| view | " + " | ".join(name for name, _, _ in codes) + " |")
    print("| --- |" + " --- |" * len(codes))
    for view in args.views.split(","):
        cells = []
        for name, _, _ in codes:
            runs = results[(view, name)]
            rate = f", {rows / statistics.median(r.wall_s for r in runs):,.0f} rows/s" if view == "export" else ""
            cells.append(median(runs) + rate)
        print(f"| {view} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
