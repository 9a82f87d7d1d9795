"""An executed notebook's own words written again in another language: the bound sentences
(:mod:`.prose`) and scores tables (:mod:`.scores`) keep their values, so a page rendered in a
language other than the one its notebook ran in (``tcplab report --render-only --language``)
can say them in its own (:mod:`tcplab.i18n` owns the translations themselves)."""

from __future__ import annotations

import copy
import json
from typing import Any

from ..i18n import LANGUAGE_METADATA
from ..words import Messages
from . import prose, scores

__all__ = ["relabel_outputs"]


def relabel_outputs(nb: Any, language: str) -> Any:
    """A copy of an executed notebook whose bound sentences (:mod:`.report.prose`) and scores
    tables are written again in ``language`` from the values they keep. What else the kernel
    wrote (figures, other tables, a check's name and rule) stays in the language it ran in."""
    nb = copy.deepcopy(nb)
    t = Messages(language)
    for cell in nb.cells:
        for output in cell.get("outputs", []) if cell.get("cell_type") == "code" else []:
            data = output.get("data") or {}
            if prose.MIME_TYPE in data:
                said = data[prose.MIME_TYPE]
                if t.has(said.get("key", "")):
                    text = t(said["key"], **{k: f.get("text", "") for k, f in (said.get("fields") or {}).items()})
                    data["text/markdown"] = data["text/plain"] = text
            elif scores.MIME_TYPE in data:
                payload = data[scores.MIME_TYPE]
                payload = json.loads(payload) if isinstance(payload, str) else payload
                fresh = scores.scores_output(scores.Scores.from_json(payload), language=language)
                data["text/html"], data["text/plain"] = fresh["text/html"], fresh["text/plain"]
    nb.metadata.setdefault("tcplab", {})[LANGUAGE_METADATA] = language
    return nb
