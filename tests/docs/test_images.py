"""The pictures in docs/images are what the code draws now.

Beside each picture, ``NAME.png.json`` holds what docs/make_figures.py drew it from: the
figure's data and a digest of the drawing code. Both are computed again here; a
difference means the picture is older than what the code would draw. Regenerate with
``PYTHONPATH=. python docs/make_figures.py``.
"""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
IMAGES = ROOT / "docs" / "images"


def _make_figures() -> Any:
    pytest.importorskip("matplotlib")
    spec = importlib.util.spec_from_file_location("make_figures",
                                                  ROOT / "docs" / "make_figures.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_picture_the_docs_show_is_made_by_make_figures() -> None:
    shown = set()
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        shown |= set(re.findall(r"images/([A-Za-z0-9_.-]+\.png)",
                                page.read_text(encoding="utf-8")))
    made_from, _ = _make_figures().sources()
    assert shown and shown <= set(made_from)
    assert {p.name for p in IMAGES.glob("*.png")} == set(made_from)


def test_each_picture_is_what_the_code_draws_now() -> None:
    made_from, _ = _make_figures().sources()
    stale = []
    for name, now in made_from.items():
        stored_path = IMAGES / f"{name}.json"
        assert stored_path.exists(), f"{name}: no {stored_path.name} beside it"
        stored = json.loads(stored_path.read_text(encoding="utf-8"))
        if stored["code"] != now["code"]:
            stale.append(f"{name}: the drawing code changed since it was made")
        elif stored["data"] != now["data"]:
            stale.append(f"{name}: the figures it shows changed since it was made")
    assert not stale, ("; ".join(stale)
                       + ". Regenerate: PYTHONPATH=. python docs/make_figures.py")
