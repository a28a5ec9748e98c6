"""The worker processes that encode an SQLite file's export chunks (feedback/export.py): each runs
`chunk_worker` on the file, one chunk at a time, because connections in one process contend on SQLite's
allocator."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import IO, Any

from sqlalchemy import Select
from sqlalchemy.engine import Dialect

from toolwise.feedback.chunk_worker import EXIT_SQLITE
from toolwise.feedback.failures import database_failure


class ExportWorkerError(RuntimeError):
    """An export's worker process ended without answering its chunk (its stderr says why)."""


class Workers:
    """Processes running `chunk_worker` on an SQLite file, one chunk at a time each. The query is
    compiled once, its parameters bound as the engine would bind them (a time as SQLite stores it)."""

    def __init__(self, database: Path, query: Select[int, bytes], dialect: Dialect, count: int) -> None:
        compiled = query.compile(dialect=dialect, compile_kwargs={"render_postcompile": True})
        self._sql = str(compiled)
        self._names = list(compiled.positiontup or ())
        self._compiled = compiled
        self._processors = {
            name: compiled.binds[name].type.dialect_impl(dialect).bind_processor(dialect) for name in self._names
        }
        worker = Path(__file__).with_name("chunk_worker.py")
        self._threads = ThreadPoolExecutor(count, thread_name_prefix="toolwise-export")  # one a worker's pipes
        self._idle: asyncio.Queue[subprocess.Popen[bytes]] = asyncio.Queue()
        self._all: list[subprocess.Popen[bytes]] = []
        for _ in range(count):
            # -I: isolated (no user site, no PYTHON* variables, not the script's folder on the path)
            process = subprocess.Popen(
                [sys.executable, "-I", str(worker), str(database)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
            self._all.append(process)
            self._idle.put_nowait(process)

    def _params(self, values: dict[str, int]) -> list[Any]:
        bound = self._compiled.construct_params(values)
        return [
            process(bound[name]) if (process := self._processors[name]) is not None else bound[name]
            for name in self._names
        ]

    async def encode(self, values: dict[str, int]) -> tuple[int, bytes]:
        """One batch, its lines each ending in a newline (the worker writes the last one), on an idle
        worker. A worker whose batch was abandoned midway is not used again (its answer is still on
        its way): `aclose` ends it."""
        job = (json.dumps({"sql": self._sql, "params": self._params(values)}) + "\n").encode()
        process = await self._idle.get()
        answer = await asyncio.get_running_loop().run_in_executor(self._threads, self._ask, process, job)
        self._idle.put_nowait(process)
        return answer

    @staticmethod
    def _ask(process: subprocess.Popen[bytes], job: bytes) -> tuple[int, bytes]:
        stdin, stdout = _pipe(process.stdin), _pipe(process.stdout)
        try:
            stdin.write(job)
            stdin.flush()
        except BrokenPipeError:
            raise _ended(process) from None
        header = stdout.readline()
        if not header:
            raise _ended(process)
        rows, size = (int(x) for x in header.split())
        text = stdout.read(size)
        if len(text) != size:
            raise _ended(process)
        return rows, text

    async def aclose(self) -> None:
        """End every worker: an idle one when its stdin closes, one still answering is killed (and
        the thread reading it sees the end of its pipe)."""
        idle = set()
        while not self._idle.empty():
            idle.add(self._idle.get_nowait().pid)
        for process in self._all:
            if process.pid not in idle:
                process.kill()
            _pipe(process.stdin).close()
        await asyncio.to_thread(self._threads.shutdown, wait=True)
        for process in self._all:
            await asyncio.to_thread(process.wait)
            _pipe(process.stdout).close()
            _pipe(process.stderr).close()


def _ended(process: subprocess.Popen[bytes]) -> Exception:
    """Why a worker ended before answering: the database's failure where SQLite said so (a damaged page:
    the user's to mend), else `ExportWorkerError` with what it left on stderr."""
    code = process.wait()
    error = _pipe(process.stderr).read().decode(errors="replace").strip()
    if code == EXIT_SQLITE:
        number, _, message = error.partition(" ")
        failure = sqlite3.DatabaseError(message)
        failure.sqlite_errorcode = int(number)  # as sqlite3 sets it on the errors it raises
        args = process.args  # [python, -I, chunk_worker.py, FILE]
        database = Path(str(args[-1])) if isinstance(args, list) else None
        found = database_failure(failure, str(database), database)
        if found is not None:
            return found
    return ExportWorkerError(
        f"export worker (pid {process.pid}) ended with exit code {code} before answering: {error or 'no message'}"
    )


def _pipe(stream: IO[bytes] | None) -> IO[bytes]:
    if stream is None:  # every worker is started with its three pipes
        raise RuntimeError("an export worker's pipe is missing")
    return stream
