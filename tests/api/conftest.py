"""Fixtures of the API tests: one user per role, two customers' engagements, and a fabricated
evidence ledger (gate run, node job, probe run, measurements, decision, signed-report row and
file) on the first, so every endpoint has an object to show or hide."""

import base64
import hashlib
from dataclasses import dataclass
from datetime import date

import pytest
from django.contrib.auth.models import User
from django.utils import timezone
from rest_framework.test import APIClient

from acceptance.models import Credential, Membership, Node, Organisation
from acceptance.tokens import api_token_create
from gates.models import CriterionVerdict, Decision
from gates.services import criterion_snapshot, engagement_create
from reports.models import Report
from runners.models import GateRun, Measurement, NodeJob, ProbeRun

HOST_KEY = "ssh-ed25519 " + base64.b64encode(b"\x00\x00\x00\x0bssh-ed25519" + bytes(36)).decode()
STDOUT = b'{"Devices": []}\n' * 4


def make_user(username: str, role: str | None, organisation: Organisation | None = None):
    user = User.objects.create_user(username)  # no password: tokens and force_login here
    if role is not None:
        Membership.objects.create(user=user, role=role, organisation=organisation)
    return user


@dataclass
class Ledger:
    engagement: object
    other_engagement: object
    gate: object
    criterion: object
    gate_run: object
    node_job: object
    probe_run: object
    measurement: object
    derived: object
    decision: object
    report: object
    report_bytes: bytes


@pytest.fixture
def users(db):
    acme = Organisation.objects.create(name="Acme")
    globex = Organisation.objects.create(name="Globex")
    return {
        "pm": make_user("pm", Membership.Role.PROJECT_MANAGER),
        "engineer": make_user("engineer", Membership.Role.ENGINEER),
        "customer": make_user("acme-buyer", Membership.Role.CUSTOMER, acme),
        "foreign": make_user("globex-buyer", Membership.Role.CUSTOMER, globex),
        "nobody": make_user("nobody", None),
    }


@pytest.fixture
def ledger(users, settings) -> Ledger:
    engagement = engagement_create(name="acme.site-1", customer="Acme",
                                   start_date=date(2026, 9, 1))
    other = engagement_create(name="globex-1", customer="Globex", start_date=date(2026, 9, 1))
    gate = engagement.gates.get(code="G1")
    criterion = gate.criteria.get(metric="drive_count")
    credential = Credential.from_secret("array-key", "PRIVATE KEY TEXT")
    credential.save()
    node = Node.objects.create(
        engagement=engagement, name="array-ctl", role=Node.Role.ARRAY, address="10.0.0.5",
        ssh_user="acctest", host_key=HOST_KEY,
        credential=credential,
    )
    now = timezone.now()
    gate_run = GateRun.objects.create(gate=gate, attempt=1, state=GateRun.State.DONE,
                                      started_by="engineer", finished_at=now)
    node_job = NodeJob.objects.create(gate_run=gate_run, node=node, state=NodeJob.State.DONE,
                                      started_at=now, finished_at=now)
    probe_run = ProbeRun.objects.create(
        gate_run=gate_run, node=node, probe="nvme_inventory", parser="nvme_list",
        parser_version="1", command="nvme list -o json", tool_version="nvme version 2.11",
        exit_code=0, stdout=STDOUT, stderr=b"warn\n", stdout_sha256=hashlib.sha256(STDOUT)
        .hexdigest(), stdout_size=len(STDOUT), stderr_size=5, started_at=now, finished_at=now,
        state=ProbeRun.State.PARSED, remote_token="secret-token")
    measurement = Measurement.objects.create(
        gate_run=gate_run, probe_run=probe_run, node=node, metric="drive_count", value=24,
        unit="1", labels={"device": "all"})
    derived = Measurement.objects.create(gate_run=gate_run, metric="line_efficiency",
                                         value=0.88, unit="ratio", labels={}, derived=True)
    derived.inputs.set([measurement])
    decision = Decision.objects.create(gate=gate, gate_run=gate_run, outcome="passed",
                                       sentence="G1 passed.", decided_by="service",
                                       decided_at=now)
    verdict = CriterionVerdict.objects.create(
        decision=decision, criterion=criterion, position=1,
        criterion_snapshot=criterion_snapshot(criterion),
        measured_value=24, unit="1", verdict="pass", explanation="24 >= 24")
    verdict.measurements.set([measurement])
    report_bytes = b"%PDF-1.7\n% a signed report stand-in\n%%EOF\n"
    directory = settings.REPORTS_DIR / engagement.name
    directory.mkdir(parents=True)
    path = directory / "acme.site-1-G1-run1.pdf"
    path.write_bytes(report_bytes)
    report = Report.objects.create(
        decision=decision, path=str(path), sha256=hashlib.sha256(report_bytes).hexdigest(),
        size_bytes=len(report_bytes), signer="CN=dev", signed_at=now)
    return Ledger(engagement, other, gate, criterion, gate_run, node_job, probe_run, measurement,
                  derived, decision, report, report_bytes)


@pytest.fixture
def client_for(users):
    """``client_for(role)``: an API client logged in by token as that role's user (None:
    anonymous)."""
    def make(role: str | None) -> APIClient:
        client = APIClient()
        if role is not None:
            _, key = api_token_create(user=users[role], name="test")
            client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
        return client

    return make


@pytest.fixture(autouse=True)
def language_reset():
    """A request in Chinese leaves its language active in this thread; later tests (and the
    services' messages they check) start from the default language again."""
    yield
    from django.conf import settings
    from django.utils import translation

    translation.activate(settings.LANGUAGE_CODE)
