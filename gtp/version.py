"""The program's version number, kept in one place: `version` in pyproject.toml's [project]
table. GTP's `version` answers it (GUIs such as Lizzie parse that answer as a number); which
net plays is told by `bgz-net` and the engine's start-up line on stderr."""
from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"
DISTRIBUTION = "batched-go-zero"


@lru_cache(maxsize=None)
def program_version() -> str:
    """pyproject.toml's [project] version; the installed distribution's when the source
    tree's file is absent; "unknown" when neither is there."""
    try:
        text = PYPROJECT.read_text(encoding="utf-8")
    except OSError:
        from importlib import metadata
        try:
            return metadata.version(DISTRIBUTION)
        except metadata.PackageNotFoundError:
            return "unknown"
    try:
        import tomllib                       # Python 3.11+
    except ModuleNotFoundError:              # 3.10: the [project] table's version line
        table = re.search(r"^\[project\]\s*$(.*?)(?=^\[|\Z)", text, re.M | re.S)
        found = table and re.search(r"^version\s*=\s*[\"']([^\"']+)[\"']", table.group(1), re.M)
        return found.group(1) if found else "unknown"
    return tomllib.loads(text)["project"]["version"]
