"""ARCHITECTURE.md stays true: every module, file and function it names exists."""

import importlib
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TEXT = (ROOT / "ARCHITECTURE.md").read_text()
APPS = ("acceptance", "gates", "runners", "reports", "notifications")
CODE = re.compile(r"`([^`]+)`")


def _named() -> tuple[set[str], set[str]]:
    paths, dotted = set(), set()
    for span in CODE.findall(TEXT):
        for word in re.split(r"[\s,()]+", span):
            word = word.split(":")[0].rstrip(".")
            if "*" in word or not word.startswith(APPS):
                continue
            if "/" in word:
                paths.add(word)
            elif re.fullmatch(r"[a-z_][\w.]*", word) and "." in word:
                dotted.add(word)
    return paths, dotted


def _resolves(name: str) -> bool:
    """``pkg.module`` or ``pkg.module.attribute[.attribute]``."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            target = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attribute in parts[cut:]:
            if not hasattr(target, attribute):
                return False
            target = getattr(target, attribute)
        return True
    return False


def test_every_file_it_names_exists():
    paths, _ = _named()
    assert len(paths) > 20
    missing = sorted(p for p in paths if not (ROOT / p).exists())
    assert missing == []


def test_every_module_and_function_it_names_exists(db):
    _, dotted = _named()
    assert len(dotted) > 15
    missing = sorted(name for name in dotted if not _resolves(name))
    assert missing == []
