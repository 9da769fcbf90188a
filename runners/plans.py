"""A gate's probe plan as the steps one node runs, in order.

A plan step is ``{"probe", "role", "params"?, "for_each"?, "labels"?, "arm"?, "nodes"?,
"node_params"?}``:
``for_each`` repeats the probe once per label value found by earlier steps (one self-test per
drive); ``labels`` are added to every measurement the step yields (e.g. ``{"round": "1"}``) and
``arm`` names the G3 tier configuration the measurements belong to. ``nodes`` picks the nodes of
the role that run the step: ``"all"`` (the default), ``"first"`` (the first by name),
``"first_per_array"`` (the first by name among the nodes reading each array) or a list of
node names. ``node_params`` maps a node name to parameters that replace ``params`` on that node
(nodes that differ: another RDMA device, or lab nodes sharing one host need their own ports).

A step may instead be a compact form, ``{"expand": KIND, "role", ...}``, that this module
expands into plain steps (the G3 cold-resume procedure of RUNBOOK §4.3 is long and regular):

``{"expand": "cold_resume_arms", "arms": [...], "rounds": N, "order"?: "abba"|"fixed",
"params": {...}, "arm_params": {ARM: {...}}}`` — for round 1 … N, each arm once (arms
interleaved, ABBA by default: local, array, array, local — one round is every arm once, never
all rounds of one arm in a block; label ``arm_order`` records each round's order), one *arm
pass*: start the engine for the arm and wait until ready (first /metrics scrape kept), the
tier sizing (arms with an LMCache config), a warm-up pass, drain, the guarded flush (arms with a
cache directory), the measured pass, the /metrics window, stop. Labels ``phase=compare``,
``arm``, ``round`` (and ``pass`` on the benchmark runs).

``{"expand": "shared_readback", "arm": ARM, "params": {...}, "arm_params": {...},
"planned_nodes"?: 8, "min_overlap_s"?: 60}`` — one arm pass of ``arm`` with the RDMA counter
sampled every second from right before to right after the measured pass (RUNBOOK §4.5: every
node of the role runs it at the same time; the aggregate over the window where all of them
read is judged against the array port). Labels ``phase=readback``, ``arm``, ``round=1``. The
sampler's start carries ``"barrier": "readback"``: it starts on every node of the role at once
(``runners.barrier``). ``planned_nodes`` (per array) and ``min_overlap_s`` are read by
``gates.services.readback_plan``.

``params`` is one pool for the whole expansion: each probe takes the parameters it declares
(``runners.probes``), ``arm_params[ARM]`` adds the arm's own (LMCache config, cache directory,
mount point, device), and the expansion sets ``arm``, ``phase``, ``round``, ``stage``,
``sample`` and ``tag`` (node, phase, arm and round: the name the engine probes of one pass share
on the node).
"""

from __future__ import annotations

from acceptance.models import Node
from gates.models import Gate
from runners.probes import probe


class PlanError(ValueError):
    """A plan step is malformed; the message names the step and what is wrong."""


def node_steps(gate: Gate, node: Node) -> list[dict]:
    """The steps of ``gate`` that run on ``node`` (its role), in plan order, expanded."""
    steps: list[dict] = []
    for step in gate.probe_plan:
        if step["role"] != node.role or not _selects(step, gate, node):
            continue
        own = (step.get("node_params") or {}).get(node.name)
        if own:
            step = {**step, "params": {**(step.get("params") or {}), **own}}
        kind = step.get("expand")
        if kind is None:
            steps.append(step)
        elif kind in EXPANSIONS:
            steps.extend(EXPANSIONS[kind](step, node))
        else:
            raise PlanError(f"{gate.code}: unknown plan expansion {kind!r} "
                            f"(known: {', '.join(sorted(EXPANSIONS))})")
    return steps


def planned_probe_count(gate: Gate, node: Node) -> int:
    """How many probe runs ``gate`` plans on ``node``, known before it starts: each plain step
    once, a ``for_each`` step once per drive the node's array is expected to have (one
    self-test per drive; once the inventory has run the page counts what it found)."""
    drives = node.array.expected_drive_count if node.array_id and node.array else 1
    return sum(drives if step.get("for_each") else 1 for step in node_steps(gate, node))


def _selects(step: dict, gate: Gate, node: Node) -> bool:
    chosen = step.get("nodes", "all")
    if chosen == "all":
        return True
    if chosen == "first":
        first = gate.engagement.nodes.filter(role=node.role).order_by("name").first()
        return first is not None and first.pk == node.pk
    if chosen == "first_per_array":  # one node per array: a single-array test (G2's fio)
        first = gate.engagement.nodes.filter(role=node.role, array_id=node.array_id).order_by(
            "name").first()
        return first is not None and first.pk == node.pk
    if isinstance(chosen, list):
        return node.name in chosen
    raise PlanError(f"{gate.code}: 'nodes' must be 'all', 'first', 'first_per_array' or a "
                    f"list of node names, not {chosen!r}")


def _step(name: str, role: str, pool: dict, labels: dict, arm: str) -> dict:
    """A plain step of probe ``name`` with the pool's parameters that probe declares."""
    spec = probe(name)
    params = {k: v for k, v in pool.items() if k in spec.params and k != "result_dir"}
    return {"probe": name, "role": role, "params": params, "labels": labels, "arm": arm}


def _arm_pass(step: dict, node: Node, arm: str, round_: int, phase: str,
              counter: bool = False) -> list[dict]:
    arm_params = (step.get("arm_params") or {}).get(arm)
    if arm_params is None and arm != "recompute":
        raise PlanError(f"arm {arm!r} has no arm_params (its LMCache config and cache "
                        f"directory)")
    pool = {**(step.get("params") or {}), **(arm_params or {}), "arm": arm, "phase": phase,
            "round": round_, "tag": f"{node.name}-{phase}-{arm}-r{round_}"}
    role = step["role"]
    labels = {"phase": phase, "arm": arm, "round": str(round_)}

    def one(name: str, **extra) -> dict:
        more = {k: v for k, v in extra.items() if k != "label"}
        step_labels = {**labels, **({"pass": extra["label"]} if "label" in extra else {})}
        return _step(name, role, {**pool, **more}, step_labels, arm)

    steps = [one("kv_engine_start")]
    if pool.get("lmcache_config"):
        steps.append(one("kv_tier_sizing"))
    steps += [one("kv_bench_pass", stage="warmup", label="warmup"),
              one("kv_engine_drain")]
    if pool.get("cache_dir"):
        steps.append(one("kv_cache_evict"))
    measured = one("kv_bench_pass", stage="measured", label="measured")
    if counter:
        # Every node of the role starts the read-back together (runners.barrier): from the
        # first counter sample on, their measured passes overlap.
        # The counter is sampled every second in the background from there to the end of
        # the measured pass, the node's clock read at the start (its skew).
        steps += [{**one("rdma_counter_series", action="start"), "barrier": "readback"},
                  measured, one("rdma_counter_series", action="stop")]
    else:
        steps.append(measured)
    steps += [one("kv_metrics_window"), one("kv_engine_stop")]
    return steps


def _cold_resume_arms(step: dict, node: Node) -> list[dict]:
    arms, rounds = step.get("arms"), step.get("rounds", 2)
    if not arms or not isinstance(arms, list):
        raise PlanError("cold_resume_arms needs a list of arms")
    if not isinstance(rounds, int) or isinstance(rounds, bool) or not 1 <= rounds <= 20:
        raise PlanError(f"cold_resume_arms: rounds must be 1 … 20, not {rounds!r}")
    order = step.get("order", "abba")
    if order not in ("abba", "fixed"):
        raise PlanError(f"cold_resume_arms: order must be 'abba' or 'fixed', not {order!r}")
    steps: list[dict] = []
    for round_ in range(1, rounds + 1):
        # ABBA: even rounds reverse the arms, so a drift over the run favours no arm; the
        # order of each round is recorded on its measurements (label ``arm_order``).
        ordered = arms[::-1] if order == "abba" and round_ % 2 == 0 else list(arms)
        for arm in ordered:
            passes = _arm_pass(step, node, arm, round_, "compare")
            for one in passes:
                one["labels"] = {**one["labels"], "arm_order": ",".join(ordered)}
            steps += passes
    return steps


def _shared_readback(step: dict, node: Node) -> list[dict]:
    if not step.get("arm"):
        raise PlanError("shared_readback needs the arm whose read-back is measured")
    planned = step.get("planned_nodes", 8)
    if isinstance(planned, bool) or not isinstance(planned, int) or not 1 <= planned <= 4096:
        raise PlanError(f"shared_readback: planned_nodes must be a whole number 1 … 4096, not "
                        f"{planned!r}")
    overlap = step.get("min_overlap_s", 60)
    if isinstance(overlap, bool) or not isinstance(overlap, int | float) or not (
            0 < overlap <= 86400):
        raise PlanError(f"shared_readback: min_overlap_s must be seconds above 0 (at most "
                        f"86400), not {overlap!r}")
    return _arm_pass(step, node, step["arm"], 1, "readback", counter=True)


EXPANSIONS = {"cold_resume_arms": _cold_resume_arms, "shared_readback": _shared_readback}
