"""An export's encoding worker for an SQLite file, run as a script (`python -I chunk_worker.py DB`):
standard library only, so it starts without the package's import time.

SQLite's allocator is one per process (and Debian's build has no per-connection lookaside), so two
connections of one process encoding JSON contend on it; two processes encode more rows a second than
two threads. The parent (`toolwise.feedback.export`) writes one job a line
on stdin, `{"sql": ..., "params": [...]}` for a query answering one row (row count, text as a BLOB);
the worker answers each with a `b"<rows> <bytes>\\n"` header and the text's bytes on stdout, its last
line ended by a newline as the others. It opens the file read-only, and exits when stdin closes. An
SQLite error (a damaged page, a failing disk) ends it with `EXIT_SQLITE` and one line on stderr,
`<sqlite result code> <message>`, for the parent to say as the database's failure; any other error with
its traceback.
"""

from __future__ import annotations

import json
import sqlite3
import sys
from urllib.parse import quote

EXIT_SQLITE = 3


def main(database: str) -> None:
    conn = sqlite3.connect(f"file:{quote(database)}?mode=ro", uri=True)
    out = sys.stdout.buffer
    try:
        for line in sys.stdin.buffer:
            job = json.loads(line)
            rows, text = conn.execute(job["sql"], job["params"]).fetchone()
            text = text or b""
            end = b"\n" if rows else b""  # each line ends in a newline, the chunk's last too
            out.write(b"%d %d\n" % (rows, len(text) + len(end)))
            out.write(text)
            out.write(end)
            out.flush()
    finally:
        conn.close()


if __name__ == "__main__":
    try:
        main(sys.argv[1])
    except sqlite3.Error as exc:
        sys.stderr.write(f"{getattr(exc, 'sqlite_errorcode', 1)} {exc}\n")
        sys.exit(EXIT_SQLITE)
