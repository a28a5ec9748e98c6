"""docs/reference.md's settings table (Configuration) names every setting of `Settings` with the default
config.py gives it, and README.md's shorter one gives those it names the same defaults: the tables are
what a user reads, config.py what runs."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from toolwise.config import RewardSettings, Settings

ROOT = Path(__file__).parents[1]
REFERENCE, README = ROOT / "docs" / "reference.md", ROOT / "README.md"
FACTORY_DEFAULTS = {"database_url", "snapshot_dir"}  # under the user data dir: the table names the place


def table(doc: Path) -> dict[str, str]:
    """Each setting the table names, with the default written beside it (`a` / `b` | 1 / 2, or one for all)."""
    section = doc.read_text().split("## Configuration", 1)[1].split("\n## ", 1)[0]
    rows: dict[str, str] = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 3 or not cells[0].startswith("`"):
            continue
        names = re.findall(r"`([a-z_0-9]+)`", cells[0])
        defaults = [d.strip() for d in cells[1].split(" / ")] if len(names) > 1 else [cells[1]]
        if len(defaults) == 1:  # one default for them all (`none`, `[]`)
            defaults *= len(names)
        assert len(defaults) == len(names), f"row {cells[0]}: {len(names)} settings, defaults {cells[1]!r}"
        rows.update(zip(names, defaults, strict=True))
    return rows


def written(value: Any) -> str:
    """A default as the table writes it."""
    if value is None:
        return "none"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, list):
        return "`[]`" if not value else json.dumps(value)
    if isinstance(value, str):
        return f"`{value}`"
    return str(value)


def differing(rows: dict[str, str]) -> list[str]:
    """The settings whose default in `rows` is not config.py's."""
    wrong = []
    for name, field in Settings.model_fields.items():
        if name not in rows or name in FACTORY_DEFAULTS or name == "reward":
            continue
        default = field.get_default(call_default_factory=True)
        if rows[name].strip("`") != written(default).strip("`"):
            wrong.append(f"{name}: documented {rows[name]}, config.py {written(default)}")
    reward = json.loads(rows["reward"].strip("`"))
    if reward != RewardSettings().model_dump():
        wrong.append(f"reward: documented {reward}, config.py {RewardSettings().model_dump()}")
    return wrong


def test_every_setting_is_in_the_reference_with_its_default() -> None:
    rows = table(REFERENCE)
    missing = sorted(set(Settings.model_fields) - set(rows))
    assert not missing, f"settings docs/reference.md does not list: {missing}"
    unknown = sorted(set(rows) - set(Settings.model_fields))
    assert not unknown, f"docs/reference.md lists settings config.py does not have: {unknown}"
    wrong = differing(rows)
    assert not wrong, "defaults that differ:\n" + "\n".join(wrong)


def test_the_readme_gives_the_settings_it_names_their_defaults() -> None:
    rows = table(README)
    unknown = sorted(set(rows) - set(Settings.model_fields))
    assert not unknown, f"README.md lists settings config.py does not have: {unknown}"
    wrong = differing(rows)
    assert not wrong, "defaults that differ:\n" + "\n".join(wrong)
