"""What the verifier's parts share: the refusal of a report that cannot be checked, and the
comparison of recorded figures with recomputed ones, each difference naming the figure."""

from __future__ import annotations

import json
import math
from typing import Any


class CannotCheck(Exception):
    """The report cannot be re-decided; the message says why."""


def same(a: float | None, b: float | None) -> bool:
    """Two recorded figures agree (both absent, or equal to a part in 10⁹)."""
    if a is None or b is None:
        return a is None and b is None
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)


def _key(metric: str, node: str, labels: dict[str, Any]) -> str:
    return json.dumps([metric, node, {k: str(v) for k, v in labels.items()}], sort_keys=True)


def figure_name(metric: str, node: str, labels: dict[str, Any]) -> str:
    """A figure as the verifier names it: ``metric on node (label=value, …)``."""
    shown = ", ".join(f"{k}={v}" for k, v in sorted(labels.items()) if k != "invalid")
    return metric + (f" on {node}" if node else "") + (f" ({shown})" if shown else "")


def compare(what: str, recorded: list[dict[str, Any]],
            recomputed: list[tuple[str, str, dict[str, Any], float, str]]) -> list[str]:
    """Differences between recorded figures (JSON) and recomputed ones (metric, node, labels,
    value, unit), each naming the figure."""
    theirs: dict[str, list[dict[str, Any]]] = {}
    for m in recorded:
        theirs.setdefault(_key(m["metric"], m.get("node", ""), m.get("labels", {})),
                          []).append(m)
    problems = []
    for metric, node, labels, value, unit in recomputed:
        found = theirs.get(_key(metric, node, labels))
        name = figure_name(metric, node, labels)
        if not found:
            problems.append(f"{what}: {name} = {value:g} {unit} is not in the report")
            continue
        m = found.pop(0)
        if not same(float(m["value"]), value) or m["unit"] != unit:
            problems.append(f"{what}: {name}: the report says {float(m['value']):g} "
                            f"{m['unit']}, the evidence gives {value:g} {unit}")
    for left in theirs.values():
        for m in left:
            name = figure_name(m["metric"], m.get("node", ""), m.get("labels", {}))
            problems.append(f"{what}: {name} = {float(m['value']):g} {m['unit']} is in the "
                            f"report but not in the evidence")
    return problems
