"""environment.yml (conda users) and pyproject.toml (pip) must list the same dependencies."""

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _name(requirement: str) -> str:
    return re.split(r"[<>=!~ \[]", requirement.strip(), maxsplit=1)[0].lower().replace("_", "-")


def test_environment_yml_matches_pyproject():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = {_name(r): r for r in project["dependencies"] + project["optional-dependencies"]["test"]}
    listed = {}
    for line in (ROOT / "environment.yml").read_text().splitlines():
        match = re.match(r"\s*-\s+(?!-e\b)([A-Za-z0-9_.\-]+[^#]*)$", line)
        if match and match.group(1).strip() not in ("pip", "pip:", "conda-forge"):
            listed[_name(match.group(1))] = match.group(1).strip()
    listed.pop("python", None)
    assert set(listed) == set(wanted), f"only in environment.yml: {set(listed) - set(wanted)}; only in pyproject: {set(wanted) - set(listed)}"
    for name, requirement in wanted.items():
        assert listed[name].replace(" ", "") == requirement.replace(" ", ""), name


def test_binder_environment_is_the_same_as_the_root_one():
    """Binder reads binder/environment.yml only (a binder/ folder hides the root's files from
    repo2docker); it must list what the root one lists, the checkout named from its folder."""
    def lines(path):
        return [line.split("#", 1)[0].rstrip() for line in path.read_text().splitlines()
                if line.split("#", 1)[0].strip()]

    root, binder = lines(ROOT / "environment.yml"), lines(ROOT / "binder" / "environment.yml")
    assert [line.replace("-e .", "-e ..") if line.strip() == "- -e ." else line for line in root] == binder
