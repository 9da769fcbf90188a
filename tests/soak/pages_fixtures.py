"""A recorded soak for the page, API and report tests that need no lab: the rows a compressed
30 s soak leaves mid-run (windows 1 … 18 of 1 s each, the drive fault injected and healed, the
link fault still planned, one collection gap, correctness answers), built with the soak
engine's own models so its queries read them exactly as they read a real soak.

``drive_impact=True`` makes windows 9 … 11 (inside the drive fault) fail 5 of 16 requests.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from types import SimpleNamespace

from django.contrib.auth.models import User
from django.test import Client

from acceptance.models import Credential, Membership, Node, Organisation
from gates.models import Gate
from gates.services import engagement_create
from runners.lab.soak import lab_plan
from runners.models import GateRun, Measurement
from runners.soak.evaluation import soak_checks_update, soak_windows_rebuild
from runners.soak.models import CollectionGap, FaultTarget, FaultWindow, Soak, SoakAgent, SoakEvent
from runners.soak.plan import plan_sha256, plan_validate

HOST_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIEJ0cSOe3UtwS2CYSXHdALRJvzAEgCtYGsJxgddM7b+R"
START = datetime(2026, 11, 30, 12, 0, 0, tzinfo=UTC)
FIGURES = {"soak": {"seconds": 30, "engine_port": 18000, "request_rate": 16, "concurrency": 4,
                    "output_len": 16, "link": {"interface": "acs-v1", "netns": "acs-ns"}}}


def person(username: str, role: str | None, organisation: str | None = None) -> SimpleNamespace:
    user = User.objects.create_user(username)
    if role:
        org = Organisation.objects.get_or_create(name=organisation)[0] if organisation else None
        Membership.objects.create(user=user, role=role, organisation=org)
    client = Client()
    client.force_login(user)
    return SimpleNamespace(user=user, client=client)


def personas(organisation: str = "ACME") -> SimpleNamespace:
    """Clients: anonymous, engineer, manager, customer (of ``organisation``), outsider
    (customer of another organisation), nobody (no role)."""
    return SimpleNamespace(
        anonymous=SimpleNamespace(user=None, client=Client()),
        engineer=person("eng-erin", Membership.Role.ENGINEER),
        manager=person("pm-paula", Membership.Role.PROJECT_MANAGER),
        customer=person("cust-carl", Membership.Role.CUSTOMER, organisation),
        outsider=person("other-olga", Membership.Role.CUSTOMER, "Other Corp"),
        nobody=person("no-role-nina", None),
    )


def soak_engagement(name: str = "acme-soak", *, lab: bool = True):
    """An engagement whose G1–G3 passed, with an array controller and one inference node,
    and G4's plan compressed to 30 s like the lab's."""
    engagement = engagement_create(name=name, customer="ACME", start_date=date(2026, 9, 21))
    engagement.is_lab = lab
    engagement.save(update_fields=["is_lab"])
    Gate.objects.filter(engagement=engagement, code__in=["G1", "G2", "G3"]).update(
        state=Gate.State.PASSED)
    gate = engagement.gates.get(code="G4")
    plan = plan_validate(lab_plan(gate.probe_plan[0]["soak"], FIGURES), lab=True)
    gate.probe_plan = [dict(gate.probe_plan[0], soak=plan)]
    gate.save(update_fields=["probe_plan"])
    credential = Credential.from_secret(f"{name}-key", "PRIVATE KEY TEXT")
    credential.save()
    common = {"engagement": engagement, "credential": credential, "address": "127.0.0.1",
              "port": 2222, "ssh_user": "acctest", "host_key": HOST_KEY, "is_lab": lab}
    array = Node.objects.create(name="lab-array", role=Node.Role.ARRAY, **common)
    inference = Node.objects.create(name="lab-inference-1", role=Node.Role.INFERENCE,
                                    interface="acs-v1", **common)
    return engagement, gate, array, inference


def _at(seconds: float) -> datetime:
    return START + timedelta(seconds=seconds)


def recorded_soak(*, drive_impact: bool = False, windows: int = 18, finished: bool = False,
                  name: str = "acme-soak", lab: bool = True) -> Soak:
    """The soak of a fresh engagement ``name`` as its rows stand after ``windows`` windows."""
    engagement, gate, array, inference = soak_engagement(name, lab=lab)
    plan = gate.probe_plan[0]["soak"]
    gate_run = GateRun.objects.create(gate=gate, attempt=1, started_by="eng-erin",
                                      state=GateRun.State.RUNNING)
    soak = Soak.objects.create(
        gate_run=gate_run, plan=plan, plan_sha256=plan_sha256(plan),
        time_compression=float(plan["time_compression"]),
        state=Soak.State.DONE if finished else Soak.State.RUNNING, started_at=_at(-2),
        load_started_at=START, loaded_s=float(windows), heartbeat_at=_at(windows))
    SoakAgent.objects.create(soak=soak, node=inference, remote_dir="/tmp/soak-x/n1",
                                     token="t", state="running", simulated=lab,
                                     last_window=windows)
    targets = {
        "drive_out": FaultTarget.objects.create(
            engagement=engagement, node=array, kind="drive_out", target="7",
            confirmed_by="eng-erin", confirmed_at=_at(-60),
            confirmation="allow drive_out of 7 on lab-array"),
        "link_down": FaultTarget.objects.create(
            engagement=engagement, node=inference, kind="link_down", target="acs-ns/acs-v1",
            confirmed_by="eng-erin", confirmed_at=_at(-60),
            confirmation="allow link_down of acs-ns/acs-v1 on lab-inference-1"),
    }
    faults = {}
    for position, fault in enumerate(plan["faults"], start=1):
        node = array if fault["kind"] == "drive_out" else inference
        faults[fault["name"]] = FaultWindow.objects.create(
            soak=soak, position=position, name=fault["name"], kind=fault["kind"], node=node,
            target=fault["target"], start_s=fault["start_s"], duration_s=fault["duration_s"],
            fault_target=targets[fault["kind"]])
    drive = faults["drive-out"]  # injected at 7.5 s, healed at 12.0 s (25 %, 15 % of 30 s)
    FaultWindow.objects.filter(id=drive.id).update(
        state=FaultWindow.State.HEALED, heal_method="setsid", heal_token="h1",
        heal_command="soak-array drive in 7", inject_command="soak-array drive out 7",
        heal_armed_at=_at(7.2), heal_verified_at=_at(7.3), injected_at=_at(7.5),
        healed_at=_at(12.0), heal_how="timer",
        safety=[{"check": "layout", "command": "soak-array drive status", "said": "raid6",
                 "ok": True}])
    rows = []
    for index in range(1, windows + 1):
        start, end = float(index - 1), float(index)
        failed = 5.0 if drive_impact and 9 <= index <= 11 else 0.0
        completed = 16.0 - failed
        labels = {"soak_window": str(index)}
        ttft = 0.31 + 0.01 * (index % 3) + (0.04 if 8 <= index <= 12 else 0.0)
        figures = {"completed_requests": (completed, "1"), "failed_requests": (failed, "1"),
                   "ttft_p99": (ttft, "s"), "output_throughput": (52.0 - (index % 2), "tok/s")}
        for metric, (value, unit) in figures.items():
            rows.append(Measurement(gate_run=gate_run, node=inference, metric=metric,
                                    value=value, unit=unit, labels=labels,
                                    sampled_at=_at(end)))
        epoch = START.timestamp()
        rows.append(Measurement(
            gate_run=gate_run, node=inference, metric="completion_gap_max", value=0.2,
            unit="s", sampled_at=_at(end),
            labels={**labels, "window_start": f"{epoch + start:.3f}",
                    "first_completion": f"{epoch + start + 0.1:.3f}",
                    "last_completion": f"{epoch + end - 0.05:.3f}"}))
    for round_no, seconds in enumerate(range(3, windows + 1, 3), start=1):
        for prompt in ("sum-contract", "code-review", "translate"):
            result = "exact"
            if drive_impact and prompt == "translate" and round_no == 3:
                result = "diverges at token 5"
            rows.append(Measurement(
                gate_run=gate_run, node=inference, metric="probe_mismatches",
                value=0.0 if result == "exact" else 1.0, unit="1", sampled_at=_at(seconds),
                labels={"prompt": prompt, "result": result, "soak_round": str(round_no)}))
    Measurement.objects.bulk_create(rows)
    CollectionGap.objects.create(soak=soak, node=None, started_at=_at(14.2),
                                 ended_at=_at(15.9),
                                 reason="the worker driving the soak stopped; re-attached")
    for seconds, kind, text in [(-2, "created", "soak of 259200 s (plan) compressed ×8640"),
                                (0, "started", "agents started on lab-inference-1"),
                                (7.2, "fault armed", "drive-out: heal armed on lab-array"),
                                (7.5, "fault injected", "drive-out: drive 7 out"),
                                (12.0, "fault healed", "drive-out: healed by the timer"),
                                (15.9, "re-attached", "collection resumed")]:
        SoakEvent.objects.create(soak=soak, at=_at(seconds), kind=kind, text=text,
                                 fault=drive if kind.startswith("fault") else None)
    soak_windows_rebuild(soak)  # as the collection folds them, window by window
    soak_checks_update(soak=soak)
    soak.refresh_from_db()
    return soak
