"""Where a checkout keeps what tcplab reads and writes: the lowest floor, importing nothing of
tcplab, so that every layer (the words among them) can find its files.

Each folder can be moved by an environment variable, for a test or an installed copy.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["ROOT", "COURSE_DIR", "REPORTS_DIR", "WORDS"]

#: The checkout: the folder that holds lib/, course/, data/ and reports/.
ROOT = Path(__file__).resolve().parents[2]
#: The course: ``course.toml`` (its cases in order) and one folder per case, its room.
COURSE_DIR = Path(os.environ.get("TCPLAB_COURSE", ROOT / "course"))
#: Where ``tcplab report`` writes unless told otherwise.
REPORTS_DIR = Path(os.environ.get("TCPLAB_REPORTS", ROOT / "reports"))
#: A room's folder of words: ``en.json`` (its source) and each translation's files.
WORDS = "words"
