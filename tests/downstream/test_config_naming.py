from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy import String

from tests.server import toy_server
from toolwise.config import AppConfig, ConfigError, HttpServer, InProcessServer, StdioServer, load_config
from toolwise.downstream.naming import MAX_LENGTH, assign, namespaced
from toolwise.feedback.records import MAX_SERVER_NAME
from toolwise.feedback.schema import ExecutionRow, ToolStatsRow


def write(tmp_path: Path, data: object) -> Path:
    path = tmp_path / "c.json"
    path.write_text(json.dumps(data) if not isinstance(data, str) else data)
    return path


def test_claude_desktop_shape_with_stdio_http_and_our_section(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TOOLWISE_POLICY", raising=False)
    config = load_config(
        write(
            tmp_path,
            {
                "mcpServers": {
                    "time": {"command": "uvx", "args": ["mcp-server-time"], "env": {"TZ": "UTC"}},
                    "remote": {"url": "http://127.0.0.1:9000/mcp"},
                },
                "toolwise": {"policy": "lints", "call_timeout_s": 5, "reward": {"success": 12}},
            },
        )
    )
    assert isinstance(config.servers["time"], StdioServer) and config.servers["time"].env == {"TZ": "UTC"}
    assert isinstance(config.servers["remote"], HttpServer)
    assert (config.toolwise.policy, config.toolwise.call_timeout_s, config.toolwise.reward.success) == ("lints", 5, 12)


def test_environment_overrides_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOLWISE_DATABASE_URL", "sqlite+aiosqlite:////tmp/elsewhere.db")
    config = load_config(write(tmp_path, {"mcpServers": {}, "toolwise": {"database_url": "sqlite+aiosqlite:///x"}}))
    assert config.toolwise.database_url.endswith("/tmp/elsewhere.db")


def test_a_bad_value_from_the_environment_names_the_variable_not_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`TOOLWISE_EXPOSURE=searhc` was reported as `invalid config: toolwise.json: exposure: …`: the user
    looked for it in a file that does not have it."""
    monkeypatch.setenv("TOOLWISE_EXPOSURE", "searhc")
    monkeypatch.setenv("toolwise_reward__success", "many")
    with pytest.raises(ConfigError) as caught:
        load_config(write(tmp_path, {"mcpServers": {}, "toolwise": {"exposure": "all"}}))
    message = str(caught.value)
    assert "exposure: Input should be 'all', 'search' or 'learned' (from TOOLWISE_EXPOSURE in the environment" in (
        message
    )
    assert "reward.success: " in message and "(from TOOLWISE_REWARD__SUCCESS in the environment" in message


def test_a_list_from_the_environment_not_written_as_json_names_the_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`TOOLWISE_PINNED_TOOLS='git__*'` ended `toolwise serve` in a traceback (pydantic-settings'
    SettingsError: "error parsing value for field ..."), exit 1, not the one line a broken setting gets."""
    monkeypatch.setenv("TOOLWISE_PINNED_TOOLS", "git__*")
    with pytest.raises(ConfigError, match=r"TOOLWISE_PINNED_TOOLS: not JSON .*\["):
        load_config(write(tmp_path, {"mcpServers": {}}))


@pytest.mark.parametrize(
    ("data", "needle"),
    [
        ("{not json", "not valid JSON"),
        ({"servers": {}}, "mcpServers"),
        ({"mcpServers": {"t": {"args": []}}}, "mcpServers.t"),
        ({"mcpServers": {"a__b": {"command": "x"}}}, "must not contain '__'"),
        ({"mcpServers": {"s" * 129: {"command": "x"}}}, "is 129 characters: the log keeps at most 128; shorten it"),
        ({"mcpServers": {}, "toolwise": {"policy": "magic"}}, "policy"),
        ({"mcpServers": {}, "toolwise": {"call_timeout_s": 0}}, "call_timeout_s"),
        ({"mcpServers": {}, "toolwise": {"colour": "red"}}, "colour"),
        ({"mcpServers": {"r": {"url": "ftp://x"}}}, "url"),
        ({"mcpServers": {"r": {"type": "sse", "url": "http://h/sse"}}}, "mcpServers.r.type: .*SSE.*'type': 'http'"),
        ({"mcpServers": {"a": {"command": "x", "prefix": ""}, "b": {"url": "http://h", "prefix": ""}}}, "'a' and 'b'"),
        ({"mcpServers": {"time": {"command": "x"}, "clock": {"command": "y", "prefix": "time"}}}, "'time' and 'clock'"),
        ({"mcpServers": {"a": {"command": "x", "prefix": "p__q"}}}, "mcpServers.a.*prefix"),
    ],
)
def test_broken_files_name_the_field(tmp_path: Path, data: object, needle: str) -> None:
    with pytest.raises(ConfigError, match=needle):
        load_config(write(tmp_path, data))


def test_names_are_safe_bounded_and_unique() -> None:
    assert namespaced("git", "git_status") == "git__git_status"
    assert namespaced("my server", "do.it/now") == "my_server__do_it_now"
    long = namespaced("s", "x" * 100)
    assert len(long) == MAX_LENGTH and long == namespaced("s", "x" * 100)
    names = assign([("a b", "t"), ("a_b", "t"), ("a.b", "t"), ("s", "x" * 100), ("s", "x" * 101)])
    assert len(set(names.values())) == 5
    assert all(
        len(n) <= MAX_LENGTH and set(n) <= set("abcdefghijklmnopqrstuvwxyz_-0123456789x") for n in names.values()
    )
    assert names == assign(reversed(list(names))), "the same pairs get the same names whatever the order"


def test_every_public_name_fits_the_log_s_tool_columns() -> None:
    """A call's record carries its public name (tool, the next call's previous_tool, the tool's summary row):
    a name longer than those columns would make PostgreSQL refuse every batch holding it. The longest server
    name a config may have, a downstream's tool name of any length, a prefix or none: still within them."""
    server, tool = "s" * MAX_SERVER_NAME, "t" * 1000
    names = assign([(server, tool), (server, tool + "x"), ("bare", tool)], {server: server, "bare": ""})
    columns = [ExecutionRow.__table__.c.tool, ExecutionRow.__table__.c.previous_tool, ToolStatsRow.__table__.c.tool]
    lengths = [column.type.length or 0 for column in columns if isinstance(column.type, String)]
    assert len(lengths) == len(columns) and max(map(len, names.values())) <= MAX_LENGTH <= min(lengths)


def test_prefixes_name_tools_and_an_empty_one_keeps_the_bare_names() -> None:
    pairs = [("time", "get_current_time"), ("everything", "echo"), ("everything", "recommend_tool")]
    names = assign(pairs, {"time": "clock", "everything": ""}, reserved={"recommend_tool"})
    assert names[("time", "get_current_time")] == "clock__get_current_time"
    assert names[("everything", "echo")] == "echo"
    assert names[("everything", "recommend_tool")] == "recommend_tool-2", "toolwise's own tools keep their names"
    assert assign(pairs)[("time", "get_current_time")] == "time__get_current_time", "the default is the server's name"


def test_a_server_defined_twice_is_named_not_dropped(tmp_path: Path) -> None:
    text = '{"mcpServers": {"time": {"command": "a"}, "git": {"command": "b"}, "time": {"command": "c"}}}'
    with pytest.raises(ConfigError, match=r"'time'.*more than once"):
        load_config(write(tmp_path, text))


def test_claude_desktop_keys_are_accepted_and_disabled_servers_are_not_started(tmp_path: Path) -> None:
    config = load_config(
        write(
            tmp_path,
            {
                "mcpServers": {
                    "time": {"type": "stdio", "command": "mcp-server-time"},
                    "off": {"command": "mcp-server-git", "disabled": True},
                    "remote": {"type": "http", "url": "http://127.0.0.1:9000/mcp", "disabled": False},
                }
            },
        )
    )
    assert sorted(config.enabled_servers) == ["remote", "time"]


def test_a_downstream_given_in_process_and_in_the_file_under_one_name_is_refused() -> None:
    config = AppConfig.model_validate({"mcpServers": {"toy": {"command": "toy"}}})
    with pytest.raises(ConfigError, match="'toy' is both in mcpServers and given in-process; rename one"):
        config.downstreams({"toy": InProcessServer(toy_server.build())})
    with pytest.raises(ConfigError, match="the log keeps names of at most 128"):
        config.downstreams({"t" * 129: InProcessServer(toy_server.build())})
    both = config.downstreams(
        {"other": InProcessServer(toy_server.build()), "off": InProcessServer(toy_server.build(), disabled=True)}
    )
    assert list(both) == ["toy", "other"]


def test_variables_in_server_fields_expand_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GH_TOKEN", "ghp_secret")
    monkeypatch.setenv("API_HOST", "api.example")
    monkeypatch.delenv("TOOLWISE_TEST_UNSET", raising=False)
    config = load_config(
        write(
            tmp_path,
            {
                "mcpServers": {
                    "gh": {
                        "command": "${TOOLWISE_TEST_UNSET:-npx}",
                        "args": ["--host", "${API_HOST}"],
                        "env": {"GITHUB_TOKEN": "${GH_TOKEN}", "LITERAL": "$GH_TOKEN"},
                    },
                    "api": {"url": "https://${API_HOST}/mcp", "headers": {"Authorization": "Bearer ${GH_TOKEN}"}},
                }
            },
        )
    )
    gh, api = config.servers["gh"], config.servers["api"]
    assert isinstance(gh, StdioServer) and isinstance(api, HttpServer)
    assert (gh.command, gh.args) == ("npx", ["--host", "api.example"])
    assert gh.env == {"GITHUB_TOKEN": "ghp_secret", "LITERAL": "$GH_TOKEN"}  # only ${…} is a reference
    assert (api.url, api.headers) == ("https://api.example/mcp", {"Authorization": "Bearer ghp_secret"})


def test_cursor_s_references_expand_as_cursor_expands_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Cursor's mcp.json names a variable `${env:NAME}` and the home folder `${userHome}`; `toolwise install`
    moves its entries as written, so toolwise reads them as Cursor does, not as text sent to the server."""
    monkeypatch.setenv("GH_TOKEN", "ghp_secret")
    monkeypatch.delenv("TOOLWISE_TEST_UNSET", raising=False)
    monkeypatch.delenv("userHome", raising=False)
    servers = {
        "notes": {"command": "notes-mcp", "args": ["--root", "${userHome}/notes"], "env": {"TOKEN": "${env:GH_TOKEN}"}},
        "api": {"url": "https://api.example/mcp", "headers": {"Authorization": "Bearer ${env:GH_TOKEN}"}},
    }
    config = load_config(write(tmp_path, {"mcpServers": servers}))
    notes, api = config.servers["notes"], config.servers["api"]
    assert isinstance(notes, StdioServer) and isinstance(api, HttpServer)
    assert notes.args == ["--root", f"{Path.home()}/notes"] and notes.env == {"TOKEN": "ghp_secret"}
    assert api.headers == {"Authorization": "Bearer ghp_secret"}
    unset = {"api": {"url": "https://api.example/mcp", "headers": {"Authorization": "${env:TOOLWISE_TEST_UNSET}"}}}
    with pytest.raises(ConfigError, match=r"Authorization: environment variable 'TOOLWISE_TEST_UNSET' is not set"):
        load_config(write(tmp_path, {"mcpServers": unset}))


def test_a_missing_variable_is_an_error_naming_it_and_where(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TOOLWISE_TEST_UNSET", raising=False)
    path = write(tmp_path, {"mcpServers": {"gh": {"command": "x", "env": {"TOKEN": "${TOOLWISE_TEST_UNSET}"}}}})
    with pytest.raises(ConfigError, match=r"mcpServers\.gh\.env\.TOKEN: environment variable 'TOOLWISE_TEST_UNSET'"):
        load_config(path)


def test_a_disabled_server_s_missing_variable_does_not_stop_the_others(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server is often disabled because its secret is not set here: it is not started, so its ${VAR} is not
    needed (the others served), and a disabled server with a missing variable is still named once enabled."""
    monkeypatch.delenv("TOOLWISE_TEST_UNSET", raising=False)
    gh = {"command": "x", "env": {"TOKEN": "${TOOLWISE_TEST_UNSET}"}, "disabled": True}
    config = load_config(write(tmp_path, {"mcpServers": {"gh": gh, "time": {"command": "mcp-server-time"}}}))
    assert list(config.enabled_servers) == ["time"]
    with pytest.raises(ConfigError, match=r"mcpServers\.gh\.env\.TOKEN: environment variable"):
        load_config(write(tmp_path, {"mcpServers": {"gh": {**gh, "disabled": False}}}))
    remote = {"url": "${TOOLWISE_TEST_UNSET}", "disabled": True}  # a url given whole by one, kept as written
    config = load_config(write(tmp_path, {"mcpServers": {"remote": remote, "time": {"command": "mcp-server-time"}}}))
    assert list(config.enabled_servers) == ["time"]
    # "true" as text is disabled too (the config reads it so), and "false" is not
    config = load_config(write(tmp_path, {"mcpServers": {"gh": {**gh, "disabled": "true"}, "time": {"command": "t"}}}))
    assert list(config.enabled_servers) == ["time"]
    with pytest.raises(ConfigError, match=r"mcpServers\.gh\.env\.TOKEN: environment variable"):
        load_config(write(tmp_path, {"mcpServers": {"gh": {**gh, "disabled": "false"}}}))


def test_a_misspelt_key_of_a_server_is_named_against_that_server_s_shape_alone(tmp_path: Path) -> None:
    path = write(
        tmp_path, {"mcpServers": {"time": {"command": "x", "arg": []}, "r": {"url": "http://h", "header": {}}}}
    )
    with pytest.raises(ConfigError) as raised:
        load_config(path)
    assert str(raised.value) == (
        f"{path}: mcpServers.time.arg: Extra inputs are not permitted; did you mean 'args'?; "
        "mcpServers.r.header: Extra inputs are not permitted; did you mean 'headers'?"
    )


def test_names_kept_across_a_change_leave_the_listing_in_its_one_order() -> None:
    """A tool list change keeps the names of the tools still listed (`kept`); the listing stays in the one
    (server, tool) order whichever downstream came up first: clients show tools/list as it comes, and the
    learner's tool order, hence its ties, follows it. Before, the tools named earlier came first: the order
    depended on which downstream started sooner."""
    pairs = [("git", "git_add"), ("git", "git_log"), ("time", "convert_time")]
    first = assign(pairs[2:])  # time came up first
    kept = assign(pairs, kept=first)
    assert list(kept) == sorted(pairs) and kept == assign(pairs)
