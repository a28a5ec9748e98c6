"""`toolwise --version` prints the installed distribution's version, where it runs from, and runs no command."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from importlib.metadata import version
from pathlib import Path

from typer.testing import CliRunner

import toolwise
from toolwise.cli.main import app


def test_version_prints_the_package_version_and_exits_0() -> None:
    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0, result.output
    where = Path(toolwise.__file__).parent
    python = f"{sys.version_info[0]}.{sys.version_info[1]}"
    assert result.output.strip() == f"toolwise {version('toolwise')} from {where} (python {python})"


def test_version_and_help_start_without_the_store_the_learner_or_the_sdk() -> None:
    """`toolwise --version` and `--help` answer at once: every command's start imports neither the feedback
    store (SQLAlchemy, alembic), nor numpy and the learner, nor the MCP SDK (~2 s of CPU together, paid before,
    by every command and by `serve` before it spawned its downstreams); `--version` not even rich (typer
    imports it to print help). Checked in a fresh interpreter."""
    heavy = ["sqlalchemy", "alembic", "numpy", "mcp", "mcp_types", "toolwise.feedback.service", "toolwise.rl.learner"]
    for args, unwanted in ((["--version"], [*heavy, "rich"]), (["--help"], heavy)):
        code = (
            "import sys\nfrom toolwise.cli.main import app\n"
            f"try:\n    app({args!r})\nexcept SystemExit:\n    pass\n"
            f"print(' '.join(m for m in {unwanted!r} if m in sys.modules), file=sys.stderr)"
        )
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
        assert done.stderr.strip() == "", f"toolwise {args[0]} imported: {done.stderr}"


def test_version_answers_from_a_checkout_that_is_not_installed() -> None:
    """A clone run through PYTHONPATH (no distribution metadata, as on a machine the wheels were carried to)
    still answers `--version` and builds its health endpoint's module: the version lives in the package
    (`toolwise.__version__`, which pyproject reads), not in what pip installed. Before, both raised
    PackageNotFoundError with a traceback."""
    code = (
        "import importlib.metadata as m\n"
        "def hiding(real):\n"
        "    def read(name):\n"
        "        if name == 'toolwise':\n            raise m.PackageNotFoundError(name)\n"
        "        return real(name)\n"
        "    return read\n"
        "m.version, m.distribution = hiding(m.version), hiding(m.distribution)\n"
        "import toolwise.server.health\n"
        "from toolwise.cli.main import app\n"
        "app(['--version'])\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"toolwise {toolwise.__version__} from "), done.stdout


def test_ctrl_c_while_the_command_still_imports_ends_it_quietly_with_130() -> None:
    """Ctrl-C within half a second of Enter lands while the `toolwise` script imports the CLI: it ends the
    command as Ctrl-C does later (exit 130, nothing printed), not with a traceback of whichever module was
    importing. Run as the installed script runs (pyproject's entry point), the import interrupted."""
    scripts = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())["project"]["scripts"]
    module, function = scripts["toolwise"].split(":")
    code = (
        "import importlib.abc, sys\n"
        "class Interrupting(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'toolwise.cli.main':\n"
        "            raise KeyboardInterrupt\n"
        "sys.meta_path.insert(0, Interrupting())\n"
        f"from {module} import {function}\n"
        f"sys.exit({function}())\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stderr) == (130, "")


def test_the_command_ends_with_its_status_and_everything_it_printed() -> None:
    """The entry point ends the process without the interpreter's teardown (cli/entry.py): what a command
    printed to a pipe still arrives whole, and its exit status is the command's (0, a usage error's 2, a
    message's 1)."""
    entry = "import sys\nfrom toolwise.cli.entry import main\nsys.argv[0] = 'toolwise'\nmain()\n"

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-c", entry, *args], capture_output=True, text=True, timeout=120)

    version = run("--version")
    assert (version.returncode, version.stdout.splitlines()[0].split()[0]) == (0, "toolwise"), version.stderr
    usage = run("inspect", "top-actions", "--limit", "0")
    assert usage.returncode == 2 and "--limit" in usage.stderr, usage.stderr
    buffered = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}  # as a shell runs it
    for exits, status, said in (("sys.exit(3)", 3, ""), ("sys.exit('gave up')", 1, "gave up")):
        # a command that prints without flushing (a pipe's buffer), then exits with a status or a message
        app = f"lambda: (print('half an answer', end=''), {exits})"
        patched = f"import sys\nimport toolwise.cli.main as m\nm.app = {app}\n" + entry
        done = subprocess.run(
            [sys.executable, "-c", patched], capture_output=True, text=True, timeout=120, env=buffered
        )
        assert (done.returncode, done.stdout, done.stderr.strip()) == (status, "half an answer", said), done.stderr
