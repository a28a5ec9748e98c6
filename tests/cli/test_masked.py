"""What the CLI prints masks the values whose names say they are secrets (tokens, keys, passwords,
credentials, authorization headers) and shows the others whole: `GIT_AUTHOR_NAME` holds a name, `PWD`
a folder."""

from __future__ import annotations

import json

import pytest

from toolwise.cli.masked import mask_args, mask_text

VALUE = "plainly-kept-value-1234"  # no secret's shape: only its name can get it masked


@pytest.mark.parametrize(
    "name",
    [
        "GITHUB_TOKEN",
        "HF_TOKEN",
        "accessToken",
        "API_KEY",
        "apiKey",
        "APIKEY",
        "X-Api-Key",
        "AWS_SECRET_ACCESS_KEY",
        "PRIVATE_KEY",
        "SLACK_SECRET",
        "DB_PASSWORD",
        "PGPASSWORD",
        "DB_PASS",
        "MYSQL_PWD",
        "Authorization",
        "Proxy-Authorization",
        "AUTH",
        "BASIC_AUTH",
        "X-Auth-Token",
        "GOOGLE_APPLICATION_CREDENTIALS",
        "REDIS_CREDS",
        "GITHUB_PAT",
        "Cookie",
        "JWT",
        "SESSION_ID",
        "bearer",
    ],
)
def test_a_value_whose_name_says_it_is_a_secret_is_masked(name: str) -> None:
    printed = mask_text(json.dumps({"env": {name: VALUE}}, indent=2))
    assert VALUE not in printed and f'"{name}": "***"' in printed


@pytest.mark.parametrize(
    "name",
    [
        "GIT_AUTHOR_NAME",
        "GIT_AUTHOR_EMAIL",
        "AUTHOR_EMAIL",
        "GIT_COMMITTER_NAME",
        "PWD",
        "OLDPWD",
        "TOKENIZERS_PARALLELISM",
        "KEYBOARD_LAYOUT",
        "PASSTHROUGH",
        "PATH",
        "SSL_CERT_FILE",
        "XDG_SESSION_TYPE",
    ],
)
def test_a_value_whose_name_merely_contains_a_secrets_word_is_shown_whole(name: str) -> None:
    printed = mask_text(json.dumps({"env": {name: VALUE}}, indent=2))
    assert f'"{name}": "{VALUE}"' in printed


def test_a_command_shows_its_author_flag_and_masks_its_token_flag() -> None:
    args = ["--author", "Ada Lovelace", "--token", VALUE, f"--api-key={VALUE}", "--pwd", VALUE]
    assert mask_args(args) == ["--author", "Ada Lovelace", "--token", "***", "--api-key=***", "--pwd", "***"]


@pytest.mark.parametrize("reference", ["${GH_TOKEN}", "${GH_TOKEN:-}", "${env:GH_TOKEN}"])
def test_a_reference_to_a_variable_is_no_secret_and_is_shown_as_written(reference: str) -> None:
    """`${GH_TOKEN}` (Claude Code's, the shell's) and `${env:GH_TOKEN}` (Cursor's) name a secret without
    holding it: the diff shows which variable the moved entry reads."""
    line = f'"headers": {{"Authorization": "Bearer {reference}"}}, "env": {{"GITHUB_TOKEN": "{reference}"}}'
    assert mask_text(line) == line
