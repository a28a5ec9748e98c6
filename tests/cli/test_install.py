"""`toolwise install` on sample configs of each client, in a temporary HOME: a dry run writes nothing,
an install moves every server and keeps every other key, a second install changes nothing, undo
puts the file back byte for byte, and a broken file is refused with its line."""

from __future__ import annotations

import errno
import json
import os
import shlex
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from toolwise.cli import clients, install, installs
from toolwise.cli.clients import Client
from toolwise.cli.installs import InstallError
from toolwise.config import load_config

SAMPLES: dict[Client, dict[str, Any]] = {
    Client.claude_desktop: {
        "mcpServers": {
            "time": {"command": "mcp-server-time", "args": ["--local-timezone", "UTC"]},
            "git": {"command": "mcp-server-git", "args": [], "env": {"GIT_AUTHOR_NAME": "me"}},
        },
        "globalShortcut": "Ctrl+Space",
    },
    Client.claude_code: {
        "numStartups": 12,
        "projects": {"/home/me/src": {"mcpServers": {}, "allowedTools": []}},
        "mcpServers": {
            "time": {"type": "stdio", "command": "mcp-server-time", "args": [], "env": {}},
            "docs": {"type": "http", "url": "https://example.com/mcp", "headers": {"X-Key": "k"}},
            "legacy": {"type": "sse", "url": "https://example.com/sse"},
        },
    },
    Client.cursor: {
        "mcpServers": {
            "git": {"command": "mcp-server-git"},
            "remote": {"url": "https://example.com/mcp"},
        }
    },
}


def write_sample(client: Client, indent: int = 2) -> tuple[Path, bytes]:
    path = clients.client_config_path(client, "linux")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(SAMPLES[client], indent=indent) + "\n")
    return path, path.read_bytes()


def files(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()}


@pytest.mark.parametrize("client", list(Client))
def test_install_dry_run_apply_rerun_and_undo(home: Path, client: Client, capsys: pytest.CaptureFixture[str]) -> None:
    path, original = write_sample(client)
    before = files(home)

    install.run(client, None, dry_run=True, undo_it=False)
    printed = capsys.readouterr().out
    assert "dry run: nothing was written" in printed and f"+++ {path}" in printed
    assert files(home) == before and path.read_bytes() == original

    install.run(client, None, dry_run=False, undo_it=False)
    said = capsys.readouterr().out
    title = {Client.claude_desktop: "Claude Desktop", Client.claude_code: "Claude Code", Client.cursor: "Cursor"}[
        client
    ]
    assert said.startswith(f"{title} config: {path}\n") and f". Restart {title}; `toolwise doctor`" in said
    doc = json.loads(path.read_text())
    sample = SAMPLES[client]
    assert {k: v for k, v in doc.items() if k != "mcpServers"} == {k: v for k, v in sample.items() if k != "mcpServers"}
    entry = doc["mcpServers"]["toolwise"]
    assert Path(entry["command"]).is_absolute() and Path(entry["command"]).exists()
    toolwise_config = home / ".config" / "toolwise" / f"{client.value}.json"
    assert entry["args"][-3:] == ["serve", "--config", str(toolwise_config)]
    assert "PATH" in entry["env"]
    served = load_config(toolwise_config).servers
    kept = {name for name in doc["mcpServers"] if name != "toolwise"}
    assert set(served) | kept == set(sample["mcpServers"]), "every server is served by toolwise or kept"
    assert not set(served) & kept
    if client is Client.claude_code:
        assert kept == {"legacy"} and entry["type"] == "stdio"  # SSE is not proxied: it stays with the client
    backups = install_backups(path)
    assert len(backups) == 1 and backups[0].read_bytes() == original
    assert not list(path.parent.glob("*.toolwise-backup-*")), "no backup beside the client's file"

    installed = path.read_bytes()
    install.run(client, None, dry_run=False, undo_it=False)
    assert "nothing to change" in capsys.readouterr().out
    assert path.read_bytes() == installed and len(install_backups(path)) == 1
    assert "toolwise" not in load_config(toolwise_config).servers, "toolwise is never wrapped inside toolwise"

    install.run(client, None, dry_run=False, undo_it=True)
    assert path.read_bytes() == original


def test_a_server_added_after_install_moves_on_the_next_install_and_undo_keeps_later_edits(home: Path) -> None:
    path, _ = write_sample(Client.claude_desktop)
    install.run(Client.claude_desktop, None, dry_run=False, undo_it=False)
    doc = json.loads(path.read_text())
    doc["mcpServers"]["fetch"] = {"command": "mcp-server-fetch"}
    doc["theme"] = "dark"  # an edit the user made after installing
    path.write_text(json.dumps(doc, indent=2))

    install.run(Client.claude_desktop, None, dry_run=False, undo_it=False)
    after = json.loads(path.read_text())
    assert list(after["mcpServers"]) == ["toolwise"]
    served = load_config(home / ".config" / "toolwise" / "claude-desktop.json").servers
    assert set(served) == {"time", "git", "fetch"}

    after["theme"] = "light"  # edited again: undo can no longer restore a backup verbatim
    path.write_text(json.dumps(after, indent=2))
    install.run(Client.claude_desktop, None, dry_run=False, undo_it=True)
    undone = json.loads(path.read_text())
    assert undone["mcpServers"] == {
        **SAMPLES[Client.claude_desktop]["mcpServers"],
        "fetch": {"command": "mcp-server-fetch"},
    }
    assert undone["theme"] == "light" and undone["globalShortcut"] == "Ctrl+Space"
    with pytest.raises(InstallError, match="no install"):
        install.run(Client.claude_desktop, None, dry_run=False, undo_it=True)


def test_a_toolwise_entry_set_up_by_hand_keeps_its_config_and_gets_the_new_servers(home: Path) -> None:
    own = home / "mine.json"
    own.write_text(json.dumps({"mcpServers": {"time": {"command": "mcp-server-time"}}, "toolwise": {"seed": 1}}))
    path = clients.client_config_path(Client.claude_desktop, "linux")
    path.parent.mkdir(parents=True)
    by_hand = {"command": "/opt/venv/bin/toolwise", "args": ["serve", "--config", str(own)]}
    path.write_text(json.dumps({"mcpServers": {"proxy": by_hand, "git": {"command": "mcp-server-git"}}}))
    install.run(Client.claude_desktop, None, dry_run=False, undo_it=False)
    entries = json.loads(path.read_text())["mcpServers"]
    assert list(entries) == ["proxy"] and entries["proxy"]["args"][-2:] == ["--config", str(own)]
    assert set(load_config(own).servers) == {"time", "git"} and load_config(own).toolwise.seed == 1
    assert not (home / ".config" / "toolwise" / "claude-desktop.json").exists()


def test_a_broken_config_is_refused_naming_its_line_and_nothing_changes(home: Path) -> None:
    path, _ = write_sample(Client.cursor)
    broken = path.read_text().replace('"mcp-server-git"', '"mcp-server-git",', 1)
    path.write_text(broken)
    line = next(i for i, text in enumerate(broken.splitlines(), 1) if "mcp-server-git" in text)
    with pytest.raises(InstallError, match=rf"not valid JSON at line {line + 1}, column \d+.*Nothing was changed"):
        install.run(Client.cursor, None, dry_run=False, undo_it=False)
    assert path.read_text() == broken and not (home / ".config" / "toolwise").exists()


def test_a_config_saved_with_a_byte_order_mark_installs(home: Path) -> None:
    path, _ = write_sample(Client.claude_desktop)
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())  # as Windows Notepad saves it
    install.run(Client.claude_desktop, None, dry_run=False, undo_it=False)
    assert list(json.loads(path.read_text())["mcpServers"]) == ["toolwise"]


def test_an_install_rewrites_only_the_moved_servers_and_keeps_the_rest_as_written(home: Path) -> None:
    """A config written by hand (compact entries, one a line) keeps every line the install does not need to
    change: the servers that stay with the client and the client's other settings come back as written."""
    path = clients.client_config_path(Client.claude_desktop, "linux")
    path.parent.mkdir(parents=True)
    kept = [
        '    "legacy": {"type": "sse", "url": "https://example.com/sse"}',
        "  },",
        '  "globalShortcut": "Ctrl+Space",',
        '  "preferences": {"theme": "dark", "zoom": [1, 2]}',
        "}",
    ]
    moved = '    "time": {"command": "mcp-server-time", "args": ["--local-timezone", "UTC"]},'
    path.write_text("\n".join(["{", '  "mcpServers": {', moved, *kept]) + "\n")
    install.run(Client.claude_desktop, None, dry_run=False, undo_it=False)
    installed = path.read_text()
    assert installed.startswith('{\n  "mcpServers": {\n    "toolwise": {\n')  # the new entry, indented as the file
    assert installed.endswith("\n".join(["", *kept, ""]))
    assert moved not in installed and list(json.loads(installed)["mcpServers"]) == ["toolwise", "legacy"]


def test_each_moved_server_is_written_in_the_toolwise_config_as_the_client_had_it(home: Path) -> None:
    """An entry moves with the keys and values it had (Claude Code's `type` too, no default added) and its
    layout: on one line it stays on one line; over several, its compact parts stay compact, re-indented to
    the toolwise config's 2 spaces from the client file's 4."""
    path = clients.client_config_path(Client.claude_code, "linux")
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [
        "{",
        '    "mcpServers": {',
        '        "time": {"type": "stdio", "command": "uvx", "args": ["mcp-server-time"]},',
        '        "git": {',
        '            "command": "uvx",',
        '            "args": ["mcp-server-git", "--repository", "/home/me/src"],',
        '            "env": {',
        '                "GIT_AUTHOR_NAME": "me"',
        "            }",
        "        }",
        "    }",
        "}",
    ]
    path.write_text("\n".join(lines) + "\n")
    install.run(Client.claude_code, None, dry_run=False, undo_it=False)
    written = (home / ".config" / "toolwise" / "claude-code.json").read_text()
    assert written == "\n".join(line.replace("    ", "  ") for line in lines) + "\n"  # a level: 2 spaces, not 4


def test_a_server_moved_into_an_existing_toolwise_config_is_written_as_the_client_had_it(home: Path) -> None:
    path, _ = write_sample(Client.cursor)
    install.run(Client.cursor, None, dry_run=False, undo_it=False)
    config = home / ".config" / "toolwise" / "cursor.json"
    before = config.read_text()
    added = '"fetch": {"command": "uvx", "args": ["mcp-server-fetch"], "env": {"FETCH_UA": "me"}}'
    path.write_text(path.read_text().replace('  "mcpServers": {\n', '  "mcpServers": {\n    ' + added + ",\n", 1))
    install.run(Client.cursor, None, dry_run=False, undo_it=False)
    assert config.read_text() == before.replace("\n    }\n  }\n}", "\n    },\n    " + added + "\n  }\n}")


def _installed_then_edited() -> tuple[Path, str]:
    """Cursor's file with one server, toolwise installed over it, then the file edited by hand (so an undo has
    no backup to restore and puts the server back itself): the file and the server's line as it was written."""
    path = clients.client_config_path(Client.cursor, "linux")
    path.parent.mkdir(parents=True)
    moved = '    "time": {"command": "uvx", "args": ["mcp-server-time"]}'
    path.write_text("\n".join(["{", '  "mcpServers": {', moved, "  }", "}", ""]))
    install.run(Client.cursor, None, dry_run=False, undo_it=False)
    path.write_text(path.read_text().replace("{\n", '{\n  "theme": "dark",\n', 1))
    return path, moved


def test_undo_after_an_edit_puts_each_server_back_as_it_was_written(home: Path) -> None:
    path, moved = _installed_then_edited()
    install.run(Client.cursor, None, dry_run=False, undo_it=True)
    assert path.read_text() == "\n".join(["{", '  "theme": "dark",', '  "mcpServers": {', moved, "  }", "}", ""])


@pytest.mark.parametrize(
    ("broken", "why"),
    [
        ('{"mcpServers": {"time": ', "not valid JSON at line 1, column 25 (Expecting value)"),
        ("a note, not JSON", "not valid JSON at line 1, column 1 (Expecting value)"),
        ('{"mcpServers": ["time"]}', "'mcpServers' is not an object"),
        (None, "it is gone"),
    ],
)
def test_undo_after_an_edit_with_the_toolwise_config_broken_says_so_and_puts_the_servers_back(
    home: Path, capsys: pytest.CaptureFixture[str], broken: str | None, why: str
) -> None:
    """The toolwise config only gives the layout the servers go back in (they come from the install's record):
    unreadable, the undo goes on in the client file's layout and says which file and what was wrong."""
    path, _ = _installed_then_edited()
    config = home / ".config" / "toolwise" / "cursor.json"
    if broken is None:
        config.unlink()
    else:
        config.write_text(broken)
    capsys.readouterr()
    install.run(Client.cursor, None, dry_run=False, undo_it=True)
    restored = json.loads(path.read_text())
    assert restored == {"theme": "dark", "mcpServers": {"time": {"command": "uvx", "args": ["mcp-server-time"]}}}
    out = capsys.readouterr().out
    assert f"warning: {config}: {why}; its servers go back in the layout of {path.name}" in out


def test_reinstalling_after_undo_keeps_an_entry_an_earlier_install_moved_without_its_type(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Installs before moved an entry without its `type` (a key that names nothing the others do not):
    the client's entry with it is the same server, not one to update in the toolwise config."""
    write_sample(Client.claude_code)
    config = home / ".config" / "toolwise" / "claude-code.json"
    config.parent.mkdir(parents=True)
    untyped = {
        name: {k: v for k, v in e.items() if k != "type"}
        for name, e in SAMPLES[Client.claude_code]["mcpServers"].items()
    }
    del untyped["legacy"]
    config.write_text(json.dumps({"mcpServers": untyped}, indent=2) + "\n")
    before = config.read_text()
    install.run(Client.claude_code, None, dry_run=False, undo_it=False)
    assert "updates" not in capsys.readouterr().out
    assert config.read_text() == before


def test_a_missing_client_config_is_refused_with_where_it_was_looked_for(home: Path) -> None:
    with pytest.raises(InstallError, match=r"no config at .*\.cursor/mcp\.json"):
        install.run(Client.cursor, None, dry_run=True, undo_it=False)


def test_a_name_that_clashes_with_a_different_served_server_is_refused(home: Path) -> None:
    path, _ = write_sample(Client.cursor)
    install.run(Client.cursor, None, dry_run=False, undo_it=False)
    doc = json.loads(path.read_text())
    doc["mcpServers"]["git"] = {"command": "other-git"}  # beside the toolwise entry that serves another 'git'
    path.write_text(json.dumps(doc, indent=2))
    edited = path.read_bytes()
    with pytest.raises(InstallError, match="'git' is in"):
        install.run(Client.cursor, None, dry_run=False, undo_it=False)
    assert path.read_bytes() == edited


def test_reinstalling_after_undo_and_an_edited_server_takes_the_clients_entry(home: Path) -> None:
    path, _ = write_sample(Client.cursor)
    install.run(Client.cursor, None, dry_run=False, undo_it=False)
    install.run(Client.cursor, None, dry_run=False, undo_it=True)
    doc = json.loads(path.read_text())
    doc["mcpServers"]["git"] = {"command": "mcp-server-git", "args": ["--repository", "/src"]}
    path.write_text(json.dumps(doc, indent=2))
    install.run(Client.cursor, None, dry_run=False, undo_it=False)  # refused before: the stale toolwise config
    served = load_config(home / ".config" / "toolwise" / "cursor.json").servers["git"]
    assert served.model_dump(exclude_defaults=True) == {"command": "mcp-server-git", "args": ["--repository", "/src"]}


def test_reinstalling_after_undo_names_the_servers_the_left_toolwise_config_still_serves(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """After install and --undo the user removed a server from the client; the next install put toolwise
    back serving it (from the toolwise config the undo left) without a word, and said it wrote that config."""
    path, _ = write_sample(Client.cursor)
    install.run(Client.cursor, None, dry_run=False, undo_it=False)
    install.run(Client.cursor, None, dry_run=False, undo_it=True)
    path.write_text(json.dumps({"mcpServers": {"git": SAMPLES[Client.cursor]["mcpServers"]["git"]}}, indent=2))
    capsys.readouterr()
    install.run(Client.cursor, None, dry_run=False, undo_it=False)
    said = capsys.readouterr().out
    config = home / ".config" / "toolwise" / "cursor.json"
    assert f"also serves 'remote', left in {config} by an earlier install (remove it there" in said, said
    assert f"wrote {path}. Restart Cursor" in said, said  # the toolwise config was not written: git is in it


def test_client_config_paths_per_os(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("APPDATA", str(home / "Roaming"))
    desktop = Client.claude_desktop
    assert clients.client_config_path(desktop, "darwin", home) == (
        home / "Library" / "Application Support" / "Claude" / "claude_desktop_config.json"
    )
    assert (
        clients.client_config_path(desktop, "win32", home) == home / "Roaming" / "Claude" / "claude_desktop_config.json"
    )
    assert (
        clients.client_config_path(desktop, "linux", home) == home / ".config" / "Claude" / "claude_desktop_config.json"
    )
    assert clients.client_config_path(Client.claude_code, "win32", home) == home / ".claude.json"
    assert clients.client_config_path(Client.cursor, "darwin", home) == home / ".cursor" / "mcp.json"


def test_on_windows_the_entry_starts_the_console_script_under_scripts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    scripts = tmp_path / "venv" / "Scripts"
    scripts.mkdir(parents=True)
    (scripts / "toolwise.exe").write_bytes(b"MZ")
    monkeypatch.setattr(sys, "executable", str(scripts / "python.exe"))
    assert clients.toolwise_command("win32") == [str(scripts / "toolwise.exe")]
    assert clients.is_toolwise({"command": r"C:\Users\me\venv\Scripts\toolwise.exe", "args": ["serve"]})


def test_without_a_console_script_the_entry_runs_the_package_and_older_entries_stay_recognised(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "executable", str(tmp_path / "bin" / "python"))
    monkeypatch.setattr("sysconfig.get_path", lambda _: str(tmp_path / "nothing"))
    command = clients.toolwise_command("linux")
    assert command == [str(tmp_path / "bin" / "python"), "-m", "toolwise"]
    assert clients.is_toolwise({"command": command[0], "args": command[1:]})
    # what `toolwise install` wrote before the package moved: never wrapped inside toolwise again
    assert clients.is_toolwise({"command": "/usr/bin/python3", "args": ["-m", "toolwise.server", "serve"]})
    assert not clients.is_toolwise({"command": "/usr/bin/python3", "args": ["-m", "mcp_server_time"]})


@pytest.mark.parametrize("clone", [True, False])
def test_an_install_from_a_clones_venv_suggests_pipx_or_uv_for_an_entry_that_outlives_the_clone(
    home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], clone: bool
) -> None:
    checkout = home / "src" / "toolwise"
    scripts = checkout / ".venv" / "bin"
    scripts.mkdir(parents=True)
    (scripts / "toolwise").write_text("#!/bin/sh\n")
    if clone:
        (checkout / ".git").mkdir()
    monkeypatch.setattr(sys, "executable", str(scripts / "python"))
    path, _ = write_sample(Client.cursor)
    install.run(Client.cursor, None, dry_run=False, undo_it=False)
    said = capsys.readouterr().out
    assert json.loads(path.read_text())["mcpServers"]["toolwise"]["command"] == str(scripts / "toolwise")
    hints = [line for line in said.splitlines() if "pipx install ." in line]
    if clone:
        assert len(hints) == 1 and "`uv tool install .`" in hints[0] and str(checkout) in hints[0], said
    else:  # a virtual environment of no clone: nothing to outlive
        assert hints == [], said


SECRET = {"mcpServers": {"api": {"command": "mcp-server-api", "env": {"API_TOKEN": "s3cret-bearer-token"}}}}


def mode(path: Path) -> int:
    return path.stat().st_mode & 0o777


@pytest.fixture
def open_umask() -> Iterator[None]:
    """The common umask 022: a file created without an explicit mode would come out 0644."""
    previous = os.umask(0o022)
    yield
    os.umask(previous)


def test_every_file_that_may_hold_a_secret_is_private_and_the_client_config_keeps_its_mode(
    home: Path, open_umask: None
) -> None:
    path = clients.client_config_path(Client.claude_desktop, "linux")
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(SECRET))
    path.chmod(0o600)
    install.run(Client.claude_desktop, None, dry_run=False, undo_it=False)
    config_dir = home / ".config" / "toolwise"
    written = [config_dir / "claude-desktop.json", config_dir / "installs.json", *install_backups(path)]
    assert "s3cret-bearer-token" in written[0].read_text()
    assert {str(p): mode(p) for p in written} == {str(p): 0o600 for p in written}
    assert mode(path) == 0o600, "a 0600 client config stays 0600"
    install.run(Client.claude_desktop, None, dry_run=False, undo_it=True)
    assert mode(path) == 0o600 and json.loads(path.read_text()) == SECRET
    assert all(mode(p) == 0o600 for p in install_backups(path))


def test_undo_puts_back_the_mode_the_client_config_had_before_the_install(home: Path, open_umask: None) -> None:
    path, original = write_sample(Client.cursor)
    path.chmod(0o640)
    install.run(Client.cursor, None, dry_run=False, undo_it=False)
    path.chmod(0o644)  # as an older toolwise (or an editor) left it
    install.run(Client.cursor, None, dry_run=False, undo_it=True)
    assert path.read_bytes() == original and mode(path) == 0o640


def linked_sample(home: Path) -> tuple[Path, Path, bytes]:
    """Cursor's config as a link to a file kept in a dotfiles folder: (the link, the file, its bytes)."""
    dotfiles = home / "dotfiles" / "cursor-mcp.json"
    dotfiles.parent.mkdir()
    dotfiles.write_text(json.dumps(SAMPLES[Client.cursor], indent=2) + "\n")
    path = clients.client_config_path(Client.cursor, "linux")
    path.parent.mkdir(parents=True)
    path.symlink_to(dotfiles)
    return path, dotfiles, dotfiles.read_bytes()


def test_a_symlinked_client_config_is_written_through_its_link(home: Path) -> None:
    path, dotfiles, original = linked_sample(home)
    install.run(Client.cursor, None, dry_run=False, undo_it=False)
    assert path.is_symlink() and path.resolve() == dotfiles
    assert "toolwise" in json.loads(dotfiles.read_text())["mcpServers"]
    install.run(Client.cursor, None, dry_run=False, undo_it=True)
    assert path.is_symlink() and dotfiles.read_bytes() == original


def test_backups_are_bounded_and_undo_still_restores_the_original(home: Path) -> None:
    path, original = write_sample(Client.claude_desktop)
    for _ in range(installs.KEEP_BACKUPS + 3):
        install.run(Client.claude_desktop, None, dry_run=False, undo_it=False)
        install.run(Client.claude_desktop, None, dry_run=False, undo_it=True)
    assert path.read_bytes() == original
    assert len(install_backups(path)) == installs.KEEP_BACKUPS
    for n in range(installs.KEEP_BACKUPS + 3):  # a server added between installs: each install writes
        doc = json.loads(path.read_text())
        doc["mcpServers"][f"added-{n}"] = {"command": "mcp-server-fetch"}
        path.write_text(json.dumps(doc, indent=2))
        install.run(Client.claude_desktop, None, dry_run=False, undo_it=False)
    assert len(install_backups(path)) == installs.KEEP_BACKUPS
    install.run(Client.claude_desktop, None, dry_run=False, undo_it=True)
    added = {f"added-{n}": {"command": "mcp-server-fetch"} for n in range(installs.KEEP_BACKUPS + 3)}
    assert json.loads(path.read_text())["mcpServers"] == {**SAMPLES[Client.claude_desktop]["mcpServers"], **added}


def install_backups(path: Path) -> list[Path]:
    return sorted(installs.backups_dir(path).glob(f"{path.name}.toolwise-backup-*"))


def test_the_toolwise_entry_carries_the_shells_certificate_and_proxy_variables(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A client app started from the desktop has none of them: its servers (npx behind a TLS-inspecting
    proxy) would fail where `toolwise doctor`, run from the shell, passes."""
    monkeypatch.setenv("SSL_CERT_FILE", "/etc/ssl/corp.pem")
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.corp:3128")
    monkeypatch.delenv("NODE_EXTRA_CA_CERTS", raising=False)
    path, _ = write_sample(Client.claude_desktop)
    install.run(Client.claude_desktop, None, dry_run=False, undo_it=False)
    env = json.loads(path.read_text())["mcpServers"]["toolwise"]["env"]
    assert env["SSL_CERT_FILE"] == "/etc/ssl/corp.pem" and env["HTTPS_PROXY"] == "http://proxy.corp:3128"
    assert "NODE_EXTRA_CA_CERTS" not in env


def test_the_diffs_printed_mask_secrets_and_the_files_keep_them(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    token, bearer = "ghp_" + "a1B2" * 9, "sk-ant-" + "x9" * 12
    sample = {
        "mcpServers": {
            "gh": {"command": "mcp-server-gh", "env": {"GITHUB_TOKEN": token, "REF": "${GH_TOKEN}", "TZ": "UTC"}},
            "api": {"url": "https://example.com/mcp", "headers": {"Authorization": f"Bearer {bearer}"}},
        }
    }
    path = clients.client_config_path(Client.claude_code, "linux")
    path.write_text(json.dumps(sample, indent=2))
    for dry_run in (True, False):
        install.run(Client.claude_code, None, dry_run=dry_run, undo_it=False)
        printed = capsys.readouterr().out
        assert token not in printed and bearer not in printed
        assert '"GITHUB_TOKEN": "ghp_***"' in printed and '"Authorization": "Bearer sk-***"' in printed
        assert '"REF": "${GH_TOKEN}"' in printed and '"TZ": "UTC"' in printed  # a reference is no secret
    written = (home / ".config" / "toolwise" / "claude-code.json").read_text()
    assert token in written and bearer in written
    install.run(Client.claude_code, None, dry_run=False, undo_it=True)
    assert token not in capsys.readouterr().out


def test_the_diffs_mask_every_secret_of_a_compact_line_and_a_secret_flags_value_and_keep_each_line(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A config written one server a line (as people write it by hand) has several secrets on one line
    of the diff's `-` side; a server's args may pass a secret after a flag; each printed line stays a line."""
    secrets = {"DB_PASSWORD": "hunter2hunter2", "SLACK_SECRET": "plainly-kept-value"}
    flag_value = "argsecret" + "Q" * 12
    line = json.dumps({"command": "mcp-server-db", "args": ["--api-key", flag_value], "env": secrets})
    path = clients.client_config_path(Client.cursor, "linux")
    path.parent.mkdir(parents=True)
    path.write_text('{\n  "mcpServers": {\n    "db": ' + line + "\n  }\n}\n")
    install.run(Client.cursor, None, dry_run=True, undo_it=False)
    printed = capsys.readouterr().out
    for secret in [*secrets.values(), flag_value]:
        assert secret not in printed
    assert '"DB_PASSWORD": "***", "SLACK_SECRET": "***"' in printed  # the client file's old line
    assert '"--api-key", "***"' in printed
    new_lines = printed.split(f"+++ {home / '.config' / 'toolwise' / 'cursor.json'}\n", 1)[1].splitlines()
    masked = '"args": ["--api-key", "***"], "env": {"DB_PASSWORD": "***", "SLACK_SECRET": "***"}}'
    assert f'+    "db": {{"command": "mcp-server-db", {masked}' in new_lines  # moved on its one line, masked


def test_a_projects_mcp_json_is_named_for_what_it_is_its_undo_works_as_printed_and_no_backup_stays_in_it(
    home: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    project = home / "src" / "app"
    project.mkdir(parents=True)
    subprocess.run(["git", "init", "-q"], cwd=project, check=True)
    mcp_json = project / ".mcp.json"
    mcp_json.write_text(json.dumps({"mcpServers": {"gh": {"command": "mcp-server-gh", "env": {"GH_TOKEN": "t" * 20}}}}))
    original = mcp_json.read_bytes()
    monkeypatch.chdir(project)  # --path relative to where it runs: recorded absolute
    install.run(Client.claude_code, Path(".mcp.json"), dry_run=False, undo_it=False)
    printed = capsys.readouterr().out
    assert f"project config (.mcp.json): {mcp_json}" in printed and "Claude Code config" not in printed
    assert "tracked by git" not in printed  # untracked: nobody else gets it
    status = subprocess.run(["git", "status", "--porcelain", "--ignored"], cwd=project, capture_output=True, text=True)
    assert status.stdout.split() == ["??", ".mcp.json"], "nothing but the file itself in the project's repository"
    undo = printed.rsplit("puts the old config back:\n", 1)[1].strip()
    monkeypatch.chdir(home)
    done = subprocess.run(shlex.split(undo), capture_output=True, text=True, env=os.environ)
    assert done.returncode == 0, done.stderr
    assert mcp_json.read_bytes() == original


CLAUDE_CODE_PROJECTS: dict[str, Any] = {
    "numStartups": 3,
    "mcpServers": {"time": {"type": "stdio", "command": "mcp-server-time", "args": []}},
    "projects": {
        "/home/me/app": {
            "allowedTools": ["Bash"],
            "mcpServers": {"gh": {"type": "stdio", "command": "mcp-server-gh", "env": {"GH_TOKEN": "t" * 24}}},
        },
        "/home/me/web": {"mcpServers": {"legacy": {"type": "sse", "url": "https://example.com/sse"}}},
        "/home/me/empty": {"mcpServers": {}, "history": []},
    },
}


def test_claude_codes_project_scopes_are_installed_each_on_its_own_config_and_undone(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = clients.client_config_path(Client.claude_code, "linux")
    path.write_text(json.dumps(CLAUDE_CODE_PROJECTS, indent=2))
    original = path.read_bytes()
    install.run(Client.claude_code, None, dry_run=False, undo_it=False)
    printed = capsys.readouterr().out
    assert "moves 1 server(s) of project /home/me/app into" in printed
    assert "stays with Claude Code of project /home/me/web: 'legacy'" in printed
    doc = json.loads(path.read_text())
    app = doc["projects"]["/home/me/app"]
    assert list(app["mcpServers"]) == ["toolwise-local"] and app["allowedTools"] == ["Bash"]
    project_config = Path(app["mcpServers"]["toolwise-local"]["args"][-1])
    user_config = Path(doc["mcpServers"]["toolwise"]["args"][-1])
    assert project_config != user_config
    assert set(load_config(project_config).servers) == {"gh"} and set(load_config(user_config).servers) == {"time"}
    assert doc["projects"]["/home/me/web"] == CLAUDE_CODE_PROJECTS["projects"]["/home/me/web"]
    assert doc["projects"]["/home/me/empty"] == CLAUDE_CODE_PROJECTS["projects"]["/home/me/empty"]
    install.run(Client.claude_code, None, dry_run=False, undo_it=True)
    assert path.read_bytes() == original


@pytest.mark.parametrize("scope", ["projects", ".mcp.json"])
def test_a_project_server_with_relative_paths_is_found_by_doctor_run_from_elsewhere(
    home: Path, monkeypatch: pytest.MonkeyPatch, scope: str
) -> None:
    """A project's server written with paths relative to the project (`./bin/notes-mcp`, `--root .`), as Claude
    Code starts it there, moves with the project as its `cwd`: before, `toolwise doctor` run from another folder
    said `command './bin/notes-mcp' not found on PATH` (and toolwise started elsewhere could not start it)."""
    project = home / "src" / "notes"
    (project / "bin").mkdir(parents=True)
    program = project / "bin" / "notes-mcp"
    program.write_text("#!/bin/sh\nexit 3\n")
    program.chmod(0o755)
    server = {"type": "stdio", "command": "./bin/notes-mcp", "args": ["--root", "."]}
    if scope == "projects":
        path = clients.client_config_path(Client.claude_code, "linux")
        path.write_text(json.dumps({"mcpServers": {}, "projects": {str(project): {"mcpServers": {"notes": server}}}}))
        install.run(Client.claude_code, None, dry_run=False, undo_it=False)
        [entry] = json.loads(path.read_text())["projects"][str(project)]["mcpServers"].values()
    else:
        path = project / ".mcp.json"
        path.write_text(json.dumps({"mcpServers": {"notes": server}}))
        install.run(Client.claude_code, path, dry_run=False, undo_it=False)
        [entry] = json.loads(path.read_text())["mcpServers"].values()
    config = Path(entry["args"][-1])
    assert getattr(load_config(config).servers["notes"], "cwd", None) == str(project)
    monkeypatch.chdir(home)  # not the project
    doctor = subprocess.run(
        [sys.executable, "-m", "toolwise", "doctor", "--config", str(config)], capture_output=True, text=True
    )
    assert "not found on PATH" not in doctor.stdout and "command exited with status 3" in doctor.stdout, doctor.stdout


def test_undo_after_an_edit_puts_each_project_scopes_servers_back(home: Path) -> None:
    path = clients.client_config_path(Client.claude_code, "linux")
    path.write_text(json.dumps(CLAUDE_CODE_PROJECTS, indent=2))
    install.run(Client.claude_code, None, dry_run=False, undo_it=False)
    doc = json.loads(path.read_text())
    doc["numStartups"] = 4  # Claude Code rewrites its file all the time
    path.write_text(json.dumps(doc, indent=2))
    install.run(Client.claude_code, None, dry_run=False, undo_it=True)
    undone = json.loads(path.read_text())
    assert undone == {**CLAUDE_CODE_PROJECTS, "numStartups": 4}


def test_an_entry_whose_url_is_a_variable_moves_and_keeps_the_reference(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DOCS_MCP_URL", "https://docs.example/mcp")
    path = clients.client_config_path(Client.cursor, "linux")
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"mcpServers": {"docs": {"url": "${DOCS_MCP_URL}"}}}))
    install.run(Client.cursor, None, dry_run=False, undo_it=False)
    config = home / ".config" / "toolwise" / "cursor.json"
    assert json.loads(config.read_text())["mcpServers"]["docs"] == {"url": "${DOCS_MCP_URL}"}
    served = load_config(config).servers["docs"]
    assert getattr(served, "url", None) == "https://docs.example/mcp"


def test_installing_into_a_mcp_json_that_git_tracks_warns_that_it_would_reach_the_team(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = home / "src" / "shared"
    project.mkdir(parents=True)
    mcp_json = project / ".mcp.json"
    mcp_json.write_text(json.dumps({"mcpServers": {"time": {"command": "mcp-server-time"}}}))
    git = ["git", "-c", "user.name=me", "-c", "user.email=me@example.com"]
    subprocess.run(["git", "init", "-q"], cwd=project, check=True)
    subprocess.run([*git, "add", ".mcp.json"], cwd=project, check=True)
    subprocess.run([*git, "commit", "-qm", "servers"], cwd=project, check=True)
    install.run(Client.claude_code, mcp_json, dry_run=True, undo_it=False)
    assert "warning: .mcp.json is tracked by git" in capsys.readouterr().out


def test_the_client_is_the_one_the_files_name_says_when_not_given(
    home: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`install --path <project>/.mcp.json` without --client is Claude Code's project scope (its entry
    typed stdio, its toolwise config named for it), not Claude Desktop's; the undo it prints says so."""
    project = home / "src" / "app"
    project.mkdir(parents=True)
    mcp_json = project / ".mcp.json"
    mcp_json.write_text(json.dumps({"mcpServers": {"time": {"command": "mcp-server-time"}}}))
    install.run(None, mcp_json, dry_run=False, undo_it=False)
    printed = capsys.readouterr().out
    entry = json.loads(mcp_json.read_text())["mcpServers"]["toolwise-project"]
    assert entry["type"] == "stdio"
    config = Path(entry["args"][entry["args"].index("--config") + 1])
    assert config.name.startswith("claude-code-"), config
    assert "--client claude-code" in printed.rsplit("puts the old config back:\n", 1)[1]
    cursor = home / "work" / ".cursor" / "mcp.json"
    cursor.parent.mkdir(parents=True)
    assert clients.client_of(cursor) is Client.cursor
    assert clients.client_of(None) is Client.claude_desktop
    assert clients.client_of(home / "elsewhere.json") is Client.claude_desktop


def test_a_missing_launcher_is_named_with_what_provides_it(
    home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PATH", str(home))  # a machine without uv
    monkeypatch.setattr(sys, "executable", str(home / "python"))
    path = clients.client_config_path(Client.claude_desktop, "linux")
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"mcpServers": {"fetch": {"command": "uvx", "args": ["mcp-server-fetch"]}}}))
    install.run(Client.claude_desktop, None, dry_run=True, undo_it=False)
    assert (
        "warning: command not found on PATH: uvx (server 'fetch'; it comes with uv (https://docs.astral.sh/uv/)); "
        "install it, or toolwise will report it as failed"
    ) in capsys.readouterr().out


def test_claude_codes_local_and_project_entries_do_not_hide_the_user_scopes_servers(home: Path) -> None:
    """Claude Code keeps one server of a name, local over project over user: a user who installed into
    ~/.claude.json and a project's .mcp.json got three entries named `toolwise`, and in that project the
    local one alone ran; the user scope's and the .mcp.json's servers were gone there."""
    path = clients.client_config_path(Client.claude_code, "linux")
    path.write_text(json.dumps(CLAUDE_CODE_PROJECTS, indent=2))
    mcp_json = home / "app" / ".mcp.json"
    mcp_json.parent.mkdir()
    mcp_json.write_text(json.dumps({"mcpServers": {"docs": {"command": "mcp-server-docs"}}}))
    install.run(Client.claude_code, None, dry_run=False, undo_it=False)
    install.run(None, mcp_json, dry_run=False, undo_it=False)
    doc = json.loads(path.read_text())
    user = set(doc["mcpServers"])
    local = set(doc["projects"]["/home/me/app"]["mcpServers"])
    project = set(json.loads(mcp_json.read_text())["mcpServers"])
    assert user == {"toolwise"} and local == {"toolwise-local"} and project == {"toolwise-project"}
    install.run(Client.claude_code, None, dry_run=False, undo_it=True)
    install.run(None, mcp_json, dry_run=False, undo_it=True)
    assert json.loads(path.read_text()) == CLAUDE_CODE_PROJECTS
    assert json.loads(mcp_json.read_text()) == {"mcpServers": {"docs": {"command": "mcp-server-docs"}}}


@pytest.mark.parametrize("bom", [b"", b"\xef\xbb\xbf"], ids=["crlf", "bom-crlf"])
def test_undo_puts_back_a_windows_saved_config_byte_for_byte(home: Path, bom: bytes) -> None:
    """A config saved on Windows (CRLF line ends, Notepad's byte order mark): the backup and --undo keep
    its bytes, not a copy with LF ends that shows every line changed (`git diff` of a project's .mcp.json)."""
    path, _ = write_sample(Client.claude_desktop)
    original = bom + path.read_bytes().replace(b"\n", b"\r\n")
    path.write_bytes(original)
    install.run(Client.claude_desktop, None, dry_run=False, undo_it=False)
    assert install_backups(path)[0].read_bytes() == original
    install.run(Client.claude_desktop, None, dry_run=False, undo_it=True)
    assert path.read_bytes() == original


def test_undo_with_its_backup_deleted_puts_the_servers_back_from_the_record(home: Path) -> None:
    """The data dir cleaned since the install (installs.json, in the config dir, is there; the backups are
    not): --undo puts the moved servers back from the install's record instead of failing with a traceback."""
    path, _ = write_sample(Client.claude_desktop)
    install.run(Client.claude_desktop, None, dry_run=False, undo_it=False)
    for saved in install_backups(path):
        saved.unlink()
    install.run(Client.claude_desktop, None, dry_run=False, undo_it=True)
    assert json.loads(path.read_text()) == SAMPLES[Client.claude_desktop]


def test_two_installs_writing_installs_json_at_once_both_finish(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two `toolwise install`s at once (Claude Desktop's and Cursor's, from a setup script) both rewrite
    installs.json: the second to finish must not take the first's temporary file away from under it
    (a FileNotFoundError after the client's config was already rewritten, its install unrecorded)."""
    path, _ = write_sample(Client.cursor)
    state = installs.state_path()
    replace = os.replace
    other: list[str] = []

    def the_other_process_writes_meanwhile(src: Any, dst: Any) -> None:
        if Path(dst) == state and not other:  # between this write's temporary file and its rename
            other.append("wrote")
            installs.write_private(state, '{"from": "the other install"}\n')
        replace(src, dst)

    monkeypatch.setattr(os, "replace", the_other_process_writes_meanwhile)
    install.run(Client.cursor, None, dry_run=False, undo_it=False)
    assert other and str(path) in installs.load_state()
    assert not list(state.parent.glob(".*toolwise-tmp*")), "no temporary file left behind"


def test_two_installs_at_once_are_both_recorded_for_undo(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two `toolwise install`s at once, into two clients: each reads installs.json, adds its record and
    writes it back; the one that writes last must not drop the other's record (its --undo would say no
    install is recorded)."""
    cursor, _ = write_sample(Client.cursor)
    desktop, desktop_bytes = write_sample(Client.claude_desktop)
    load = installs.load_state
    cursor_read, desktop_done = threading.Event(), threading.Event()

    def reading_slowly() -> dict[str, list[dict[str, Any]]]:
        state = load()
        if threading.current_thread().name == "cursor" and not cursor_read.is_set():
            cursor_read.set()
            desktop_done.wait(timeout=1)  # the other install runs meanwhile, if it may
        return state

    def desktop_install() -> None:
        cursor_read.wait(timeout=10)
        install.run(Client.claude_desktop, None, dry_run=False, undo_it=False)
        desktop_done.set()

    monkeypatch.setattr(installs, "load_state", reading_slowly)
    threads = [
        threading.Thread(target=install.run, args=(Client.cursor, None, False, False), name="cursor"),
        threading.Thread(target=desktop_install, name="desktop"),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert set(installs.load_state()) == {str(cursor), str(desktop)}
    install.run(Client.claude_desktop, None, dry_run=False, undo_it=True)
    assert desktop.read_bytes() == desktop_bytes


def test_undo_of_an_install_recorded_with_line_ends_read_as_lf_still_restores_the_backup(home: Path) -> None:
    """Installs recorded before configs were read byte for byte hashed the text with its CRLF ends read
    as LF (toolwise on Windows wrote CRLF): --undo still finds the file unchanged and restores its backup."""
    path, original = write_sample(Client.cursor)
    install.run(Client.cursor, None, dry_run=False, undo_it=False)
    path.write_bytes(path.read_bytes().replace(b"\n", b"\r\n"))  # what the recorded write left on Windows
    install.run(Client.cursor, None, dry_run=False, undo_it=True)
    assert path.read_bytes() == original


def test_an_install_through_a_link_is_undone_through_its_target(home: Path) -> None:
    path, dotfiles, original = linked_sample(home)
    install.run(Client.cursor, None, dry_run=False, undo_it=False)  # through the link
    install.run(Client.cursor, dotfiles, dry_run=False, undo_it=True)  # the file it points to, by its own path
    assert dotfiles.read_bytes() == original and installs.load_state() == {}
    install.run(Client.cursor, dotfiles, dry_run=False, undo_it=False)  # and the other way
    install.run(Client.cursor, None, dry_run=False, undo_it=True)
    assert path.is_symlink() and dotfiles.read_bytes() == original and installs.load_state() == {}


def test_on_windows_an_install_waits_for_another_past_the_lock_s_ten_seconds(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """msvcrt's LK_LOCK tries for 10 s, then raises OSError (EDEADLOCK): an install started while another
    ran longer than that (a slow disk, a prompt) ended in a traceback where on POSIX it waits its turn."""
    tries: list[int] = []

    def locking(fd: int, mode: int, size: int) -> None:
        tries.append(mode)
        if len(tries) < 3:  # the other install holds it for 20 s and more
            raise OSError(errno.EDEADLOCK, "Resource deadlock avoided")

    monkeypatch.setattr(sys, "platform", "win32")
    monkeypatch.setitem(sys.modules, "msvcrt", SimpleNamespace(LK_LOCK=1, locking=locking))
    with installs.one_at_a_time():
        held = True
    assert held and tries == [1, 1, 1]


def test_the_install_lock_file_is_private_like_its_neighbours(home: Path, open_umask: None) -> None:
    """installs.json and the backups beside it are 0600: their lock file was made 0644 by the umask, and one
    an older toolwise left so stays so."""
    lock = home / ".config" / "toolwise" / "installs.json.lock"
    with installs.one_at_a_time():
        pass
    assert mode(lock) == 0o600
    lock.chmod(0o644)  # as an older toolwise left it
    with installs.one_at_a_time():
        pass
    assert mode(lock) == 0o600
