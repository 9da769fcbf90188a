"""A gate's probe plan as the steps one node runs, in order.

A plan step is ``{"probe", "role", "params"?, "for_each"?, "labels"?, "arm"?}``:
``for_each`` repeats the probe once per label value found by earlier steps (one self-test per
drive); ``labels`` are added to every measurement the step yields (e.g. ``{"round": "1"}``) and
``arm`` names the G3 tier configuration the measurements belong to.
"""

from __future__ import annotations

from acceptance.models import Node
from gates.models import Gate


def node_steps(gate: Gate, node: Node) -> list[dict]:
    """The steps of ``gate`` that run on ``node`` (its role), in plan order."""
    return [step for step in gate.probe_plan if step["role"] == node.role]
