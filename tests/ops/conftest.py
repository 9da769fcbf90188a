"""Rows for the operations tests: an engagement with nodes, gate runs, jobs and probe runs,
made directly (no SSH), and the staff / non-staff people who read the metrics."""

from __future__ import annotations

import base64
import os
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from acceptance.models import Credential, Node
from gates.services import engagement_create
from runners.models import GateRun, NodeJob, ProbeRun


@pytest.fixture(autouse=True)
def fast_passwords(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def redis_url():
    url = os.environ.get("TEST_REDIS_URL")
    if not url:
        pytest.skip("no Redis: set TEST_REDIS_URL (scripts/test does)")
    import redis

    client = redis.Redis.from_url(url)
    client.flushdb()
    yield url
    client.flushdb()


class Ledger:
    """Makes ledger rows of one engagement."""

    def __init__(self, name: str = "ops-1"):
        self.engagement = engagement_create(name=name, customer="ACME",
                                            start_date=timezone.localdate())
        credential = Credential.from_secret(f"{name}-key", "not a real key")
        credential.save()
        key = "ssh-ed25519 " + base64.b64encode(b"ops-host-key").decode()
        self.node = Node.objects.create(engagement=self.engagement, name="array-ctl",
                                        role=Node.Role.ARRAY, address="10.0.0.1",
                                        ssh_user="acctest", host_key=key, credential=credential)
        self.attempts = 0

    def run(self, state: str, code: str = "G1") -> GateRun:
        self.attempts += 1
        return GateRun.objects.create(gate=self.engagement.gates.get(code=code),
                                      attempt=self.attempts, state=state, started_by="erin")

    def job(self, run: GateRun, state: str, **fields) -> NodeJob:
        return NodeJob.objects.create(gate_run=run, node=self.node, state=state, **fields)

    def probe_run(self, run: GateRun, probe: str, seconds: float | None,
                  stdout: bytes = b"", **fields) -> ProbeRun:
        started = timezone.now() - timedelta(hours=1)
        return ProbeRun.objects.create(
            gate_run=run, node=self.node, probe=probe, parser=probe, parser_version="1",
            command=probe, started_at=started,
            finished_at=None if seconds is None else started + timedelta(seconds=seconds),
            stdout=stdout, stdout_size=len(stdout), **fields)


@pytest.fixture
def ledger(db):
    return Ledger()


@pytest.fixture
def staff(db):
    return User.objects.create_user("sam-staff", password="pw", is_staff=True)


@pytest.fixture
def not_staff(db):
    return User.objects.create_user("nick-notstaff", password="pw")
