"""How long a stdio client waits for the server it stops: from closing the server's stdin (as a client does
when it quits) to the process's exit, `toolwise serve` over bench/echo_server.py against the bare SDK proxy
(bench/bare_proxy.py) over the same downstream, rounds alternated. The SDK's own stdio client gives a server 2 s
before it sends SIGTERM.

    python bench/stop.py [--rounds 8]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).parent
ECHO = [sys.executable, str(HERE / "echo_server.py")]
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "stop", "version": "1"}},
}


def stop_time(command: list[str], env: dict[str, str]) -> float:
    """Seconds from stdin closed to exit, after an initialize, tools/list and a second idle."""
    pipes = {"stdin": subprocess.PIPE, "stdout": subprocess.PIPE, "stderr": subprocess.DEVNULL}
    process = subprocess.Popen(command, env=env, **pipes)  # type: ignore[call-overload]
    assert process.stdin is not None and process.stdout is not None

    def ask(message: dict[str, object]) -> None:
        process.stdin.write((json.dumps(message) + "\n").encode())
        process.stdin.flush()

    ask(INITIALIZE)
    process.stdout.readline()
    ask({"jsonrpc": "2.0", "method": "notifications/initialized"})
    ask({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
    if not process.stdout.readline():
        raise SystemExit(f"{command[0]} ended before it listed its tools")
    time.sleep(1.0)
    start = time.perf_counter()
    process.stdin.close()
    if process.wait(timeout=60) != 0:
        raise SystemExit(f"{command[0]} exited with status {process.returncode}")
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=8)
    args = parser.parse_args()
    toolwise = shutil.which("toolwise", path=str(Path(sys.executable).parent)) or "toolwise"
    with tempfile.TemporaryDirectory() as home:
        config = Path(home) / "toolwise.json"
        config.write_text(json.dumps({"mcpServers": {"echo": {"command": ECHO[0], "args": ECHO[1:]}}}))
        env = {**os.environ, "HOME": home, "XDG_DATA_HOME": f"{home}/data", "XDG_CONFIG_HOME": f"{home}/config"}
        commands = {
            "toolwise serve": [toolwise, "serve", "--config", str(config)],
            "bare SDK proxy (reference)": [sys.executable, str(HERE / "bare_proxy.py"), *ECHO[1:]],
        }
        times: dict[str, list[float]] = {name: [] for name in commands}
        for round_ in range(args.rounds):
            for name in list(commands)[:: 1 if round_ % 2 == 0 else -1]:  # each first in turn
                times[name].append(stop_time(commands[name], env))
    print(f"stdin closed → exit, {args.rounds} rounds alternated (s):")
    for name, seconds in times.items():
        print(f"  {name}: median {statistics.median(seconds):.2f}, max {max(seconds):.2f}")
    ratio = statistics.median(times["toolwise serve"]) / statistics.median(times["bare SDK proxy (reference)"])
    print(f"  toolwise / bare proxy: {ratio:.2f}")


if __name__ == "__main__":
    main()
