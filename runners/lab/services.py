"""``lab up`` / ``lab down``: a lab engagement whose nodes are a local sshd with stand-in tools.

``lab_up`` starts the server and creates (or resets) the engagement ``lab-NAME``: organisation
"Lab", an FX100 array, an array-controller node and an inference node (both the same loopback
server: one machine standing in for two), host key pinned as an engineer would have enrolled it,
and its bill of materials ticked by the lab set-up, recorded as such. Every output a stand-in
prints carries the simulated-evidence marker, so reports mark it.
"""

from __future__ import annotations

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from acceptance.models import Array, AuditEntry, Credential, Engagement, Node
from gates.models import Decision
from gates.services import engagement_create
from reports.models import Report
from runners.lab import server
from runners.lab.scenarios import SCENARIOS, scenario_with
from runners.models import GateRun

LAB_ACTOR = "lab set-up (automatic)"
LAB_BOM = [
    ("FX100 all-flash NVMe-oF array, 24 × 7.68 TB U.2 NVMe", 1),
    ("100 GbE RoCEv2 NIC for the array port", 1),
    ("QSFP28 direct-attach copper cable, 3 m", 2),
    ("Rack rail kit", 1),
    ("Redundant power supply unit", 2),
]


def lab_directory(name: str):
    return settings.LAB_DIR / name


@transaction.atomic
def _engagement_reset(name: str) -> None:
    """Remove an earlier lab engagement of this name with all its runs (files on disk stay)."""
    existing = Engagement.objects.filter(name=name, is_lab=True).first()
    if existing is None:
        if Engagement.objects.filter(name=name).exists():
            raise server.LabError(f"engagement {name} exists and is not a lab engagement")
        return
    Report.objects.filter(decision__gate__engagement=existing).delete()
    Decision.objects.filter(gate__engagement=existing).delete()
    GateRun.objects.filter(gate__engagement=existing).delete()
    credentials = list(Credential.objects.filter(nodes__engagement=existing).distinct())
    existing.delete()
    for credential in credentials:
        if not credential.nodes.exists():
            credential.delete()


def lab_up(*, scenario_name: str, engagement_name: str | None = None,
           overrides: dict | None = None) -> tuple[Engagement, server.LabServer]:
    """Start the lab server for ``scenario_name`` and create/reset its engagement.

    ``overrides`` changes figures of the scenario section by section (tests use it). Raises
    KeyError for an unknown scenario and LabError when the server cannot start.
    """
    figures = scenario_with(scenario_name, overrides or {})
    name = engagement_name or f"lab-{scenario_name}"
    lab = server.server_start(lab_directory(name), scenario=figures)
    try:
        engagement = _lab_engagement(name, figures, lab)
    except Exception:
        server.server_stop(lab.directory)
        raise
    return engagement, lab


@transaction.atomic
def _lab_engagement(name: str, figures: dict, lab: server.LabServer) -> Engagement:
    _engagement_reset(name)
    engagement = engagement_create(name=name, customer="Lab", start_date=timezone.localdate(),
                                   is_lab=True)
    array = Array.objects.create(
        engagement=engagement, model="FX100", serial=f"LAB-{figures['name'].upper()}",
        expected_drive_count=24, link_speed_mbps=figures["link"]["speed_mbps"],
        layout=Array.Layout.RAID5,
    )
    credential = Credential.from_secret(f"{name}-client-key", lab.client_private_key)
    Credential.objects.filter(name=credential.name).delete()
    credential.save()
    common = {"engagement": engagement, "address": lab.address, "port": lab.port,
              "ssh_user": lab.user, "host_key": lab.host_key, "credential": credential,
              "array": array, "is_lab": True}
    Node.objects.create(name="lab-array-controller", role=Node.Role.ARRAY, **common)
    Node.objects.create(name="lab-inference-1", role=Node.Role.INFERENCE,
                        interface=figures["link"]["interface"],
                        fio_target=figures["fio"]["device"], **common)
    now = timezone.now()
    for position, (description, quantity) in enumerate(LAB_BOM, start=1):
        engagement.bom_items.create(position=position, description=description,
                                    quantity=quantity, ticked_by=LAB_ACTOR, ticked_at=now)
    AuditEntry.objects.create(
        engagement=engagement, actor=LAB_ACTOR, action="lab engagement created",
        reason=f"lab up --scenario {figures['name']}: simulated evidence from stand-in tools",
        details={"port": lab.port, "scenario": figures["name"],
                 "bom": "ticked by the lab set-up, not by a person"},
    )
    return engagement


def lab_down() -> list[str]:
    """Stop every lab server started under LAB_DIR; returns the names stopped."""
    stopped = []
    if settings.LAB_DIR.exists():
        for directory in sorted(settings.LAB_DIR.iterdir()):
            if directory.is_dir() and server.server_stop(directory):
                stopped.append(directory.name)
    return stopped


def scenario_names() -> list[str]:
    return sorted(SCENARIOS)
