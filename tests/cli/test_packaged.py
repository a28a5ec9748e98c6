"""toolwise installed as a user installs it: built from a copy of the checkout and installed, not
editable, into a fresh virtual environment (what `pipx install .` and `uv tool install .` do). Its
command answers `--version` whatever the shell's PATH, the demo's example config ships inside it, and
the client entry `install` writes starts that installed command and its servers with the entry's own
environment alone, not the PATH of the shell that ran `install`."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from importlib.metadata import version
from pathlib import Path

import pytest

pytestmark = [
    pytest.mark.skipif(sys.platform == "win32", reason="a POSIX venv layout (bin/)"),
    # The suite's 90 s bounds each test, not the module's build below (~8 s of CPU: at a load of 10 on two
    # cores it took most of the first test's 90 s); each step of the build has a bound of its own.
    pytest.mark.timeout(func_only=True),
]
ROOT = Path(__file__).resolve().parents[2]
BARE_PATH = "/usr/bin:/bin"  # what a desktop app starts with, and nothing of this checkout's venv
BUILD_STEP_S = 300  # the most one step of the build may take: a hung build fails, naming the step


def test_the_packaged_example_config_is_the_checkouts() -> None:
    packaged = ROOT / "src" / "toolwise" / "cli" / "toolwise.example.json"
    assert packaged.read_bytes() == (ROOT / "toolwise.example.json").read_bytes()


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bin folder of a fresh venv holding toolwise built from the checkout's files (its
    dependencies are this venv's, reached through a .pth file: no download beyond the build's own)."""
    work = tmp_path_factory.mktemp("packaged")
    listed = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, capture_output=True, check=True
    )
    clone = work / "clone"
    for name in filter(None, listed.stdout.decode().split("\0")):
        if (ROOT / name).is_file():
            (clone / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, clone / name)
    venv = work / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=BUILD_STEP_S)
    python = venv / "bin" / "python"
    # One pip run builds the wheel (in its own build environment, as pipx does) and installs it: a pip
    # wheel then a pip install cost ~3 s of CPU more.
    install = [sys.executable, "-m", "pip", "-q", "--disable-pip-version-check", "--python", str(python)]
    subprocess.run([*install, "install", "--no-deps", str(clone)], check=True, timeout=BUILD_STEP_S)
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        capture_output=True,
        text=True,
        check=True,
        timeout=BUILD_STEP_S,
    ).stdout.strip()
    (Path(purelib) / "dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n")
    return venv / "bin"


def test_the_installed_command_answers_its_version_on_a_bare_path(installed: Path, tmp_path: Path) -> None:
    env = {"PATH": BARE_PATH, "HOME": str(tmp_path)}
    result = subprocess.run([str(installed / "toolwise"), "--version"], capture_output=True, text=True, env=env)
    assert result.returncode == 0, result.stderr
    said, where = result.stdout.strip().split(" (python ")[0].split(" from ")
    assert said == f"toolwise {version('toolwise')}", result.stdout
    assert Path(where).is_relative_to(installed.parent), f"the installed copy, not the checkout's: {result.stdout}"
    # cli/common.py's EXAMPLE_CONFIG, the demo's config, beside the package's own files:
    assert (Path(where) / "cli" / "toolwise.example.json").is_file(), "the demo's example config ships in the package"


def test_the_client_entry_starts_the_installed_command_without_the_shells_path(installed: Path, tmp_path: Path) -> None:
    home = {
        "HOME": str(tmp_path),
        "XDG_CONFIG_HOME": str(tmp_path / ".config"),
        "XDG_DATA_HOME": str(tmp_path / ".local" / "share"),
    }
    cursor = tmp_path / ".cursor" / "mcp.json"
    cursor.parent.mkdir()
    cursor.write_text(json.dumps({"mcpServers": {"time": {"command": "mcp-server-time"}}}))
    shell = os.pathsep.join([str(tmp_path / "in-the-shell-only"), str(Path(sys.executable).parent), BARE_PATH])
    done = subprocess.run(
        [str(installed / "toolwise"), "install", "--client", "cursor"],
        capture_output=True,
        text=True,
        env={**home, "PATH": shell},
    )
    assert done.returncode == 0, done.stderr
    entry = json.loads(cursor.read_text())["mcpServers"]["toolwise"]
    assert entry["command"] == str(installed / "toolwise")
    assert "in-the-shell-only" not in entry["env"]["PATH"], "the shell's PATH is not pinned"
    # As the client starts it: the entry's command, args and env, nothing of the shell's.
    doctor = [entry["command"], "doctor", *entry["args"][entry["args"].index("--config") :]]
    checked = subprocess.run(doctor, capture_output=True, text=True, env={**home, **entry["env"]}, timeout=120)
    assert checked.returncode == 0 and "everything starts" in checked.stdout, checked.stdout + checked.stderr
