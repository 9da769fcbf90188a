"""Evidence import under hostile bundles (issue 13 items 5 and 6): the passed-gate confirmation
and audit on every import path, a bounded number of bundles, gzip bombs and member floods
stopped while reading with memory bounded, nothing stored on refusal."""

import gzip
import io
import json
import tarfile
import tracemalloc
from datetime import date

import pytest
from django.core.management import call_command

from acceptance.models import AuditEntry
from gates.services import engagement_create
from runners import evidence
from runners.dispatch import ConfirmationRequired
from runners.evidence import EvidenceRefused, evidence_import
from runners.models import GateRun, Measurement, ProbeRun
from tests.runners.test_evidence import collect_on_node

MANIFEST = json.dumps({"format": evidence.FORMAT}).encode()


@pytest.fixture
def gate(db):
    engagement = engagement_create(name="limits", customer="c", start_date=date(2026, 1, 1))
    return engagement.gates.get(code="G1")


def stored():
    return GateRun.objects.count(), ProbeRun.objects.count(), Measurement.objects.count()


def tar_gz(members, level=9):
    """A tar.gz of (TarInfo or name, bytes or a size of zeros) written as a stream."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz", compresslevel=level) as archive:
        for name, data in members:
            info = name if isinstance(name, tarfile.TarInfo) else tarfile.TarInfo(name)
            if isinstance(data, int):
                info.size = data
                archive.addfile(info, _Zeros(data))
            else:
                info.size = len(data)
                archive.addfile(info, io.BytesIO(data))
    return out.getvalue()


class _Zeros(io.RawIOBase):
    def __init__(self, size):
        self.left = size

    def readable(self):
        return True

    def readinto(self, buffer):
        count = min(len(buffer), self.left)
        buffer[:count] = bytes(count)
        self.left -= count
        return count


class CountingReader(io.BytesIO):
    """Records how far the import read the compressed bundle."""

    furthest = 0

    def read(self, size=-1):
        data = super().read(size)
        self.furthest = max(self.furthest, self.tell())
        return data


def refused_with_bounded_memory(gate, bundles, match, bound):
    before = stored()
    tracemalloc.start()
    try:
        with pytest.raises(EvidenceRefused, match=match):
            evidence_import(gate=gate, bundles=bundles, imported_by="x")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert stored() == before
    assert peak < bound, f"peak {peak / 2**20:.1f} MiB"
    return peak


def test_it_refuses_more_bundles_than_allowed_before_reading_any(gate):
    bundles = [(f"b{i}.tar.gz", b"not even a tar") for i in range(evidence.MAX_BUNDLES + 1)]
    before = stored()
    with pytest.raises(EvidenceRefused, match="17 bundles: at most 16 in one import"):
        evidence_import(gate=gate, bundles=bundles, imported_by="x")
    assert stored() == before


def test_it_stops_a_gzip_bomb_at_the_limit_with_memory_bounded(gate, monkeypatch):
    monkeypatch.setattr(evidence, "MAX_TOTAL_BYTES", 160 << 20)
    # 3 × 60 MiB of zeros: about 180 KiB compressed, 180 MiB decompressed.
    bomb = tar_gz([("manifest.json", MANIFEST)]
                  + [(f"runs/00{i}-nvme_inventory.stdout", 60 << 20) for i in range(3)])
    assert len(bomb) < 1 << 20
    peak = refused_with_bounded_memory(gate, [("bomb.tar.gz", bomb)],
                                       "contents exceed 160 MiB", 8 << 20)
    print(f"gzip bomb {len(bomb) >> 10} KiB -> 180 MiB: peak {peak / 2**20:.2f} MiB")


def test_the_decompressed_limit_counts_every_bundle_of_the_import(gate, monkeypatch):
    monkeypatch.setattr(evidence, "MAX_TOTAL_BYTES", 100 << 20)
    one = tar_gz([("manifest.json", MANIFEST), ("runs/001-nvme_inventory.stdout", 40 << 20)])
    def check_nothing(bundle, gate):  # reading only: each bundle stands for its own node
        bundle.node = type("Node", (), {"name": bundle.name})()

    monkeypatch.setattr(evidence, "_check_bundle", check_nothing)
    with pytest.raises(EvidenceRefused, match="c.tar.gz: contents exceed 100 MiB"):
        evidence_import(gate=gate, bundles=[("a.tar.gz", one), ("b.tar.gz", one),
                                            ("c.tar.gz", one)], imported_by="x")


def test_it_stops_a_header_bomb_while_decompressing(gate):
    # A pax header claiming 200 MiB: tarfile would read it into memory whole.
    raw = io.BytesIO()
    header = tarfile.TarInfo("././@PaxHeader")
    header.type, header.size = tarfile.XHDTYPE, 200 << 20
    raw.write(header.tobuf(format=tarfile.USTAR_FORMAT))
    compressed = io.BytesIO()
    with gzip.GzipFile(fileobj=compressed, mode="wb") as out:
        out.write(raw.getvalue())
        for _ in range(200):
            out.write(b"a" * (1 << 20))
    peak = refused_with_bounded_memory(gate, [("pax.tar.gz", compressed.getvalue())],
                                       "archive headers larger than 1 MiB", 8 << 20)
    print(f"pax header bomb: peak {peak / 2**20:.2f} MiB")


def test_it_refuses_too_many_members_before_reading_them_all(gate, monkeypatch):
    monkeypatch.setattr(evidence, "MAX_MEMBERS", 50)
    members = [("manifest.json", MANIFEST)] + [
        (f"runs/{i:05d}-nvme_inventory.stdout", f"{i}".encode() * 50) for i in range(20_000)]
    bundle = CountingReader(tar_gz(members))
    with pytest.raises(EvidenceRefused, match="more than 50 files"):
        evidence_import(gate=gate, bundles=[("many.tar.gz", bundle)], imported_by="x")
    assert bundle.furthest < len(bundle.getvalue()) // 10


def test_it_refuses_sparse_files_and_an_oversized_manifest(gate):
    sparse = tarfile.TarInfo("runs/001-nvme_inventory.stdout")
    sparse.type = tarfile.GNUTYPE_SPARSE
    with pytest.raises(EvidenceRefused, match="not a regular file"):
        evidence_import(gate=gate, bundles=[("s.tar.gz", tar_gz([(sparse, b"")]))],
                        imported_by="x")
    big = tar_gz([("manifest.json", b" " * (evidence.MAX_MANIFEST_BYTES + 1))])
    with pytest.raises(EvidenceRefused, match="manifest.json is larger than 1 MiB"):
        evidence_import(gate=gate, bundles=[("m.tar.gz", big)], imported_by="x")


@pytest.mark.slow
def test_an_import_on_a_passed_gate_needs_confirmation_and_is_audited(lab, tmp_path, client,
                                                                        django_user_model):
    from acceptance.models import Membership

    engagement, _ = lab("missing-drive")
    gate, bundles = collect_on_node(engagement, "G1", tmp_path)
    engagement.gates.filter(code="G1").update(state="passed")
    gate.refresh_from_db()
    before = stored()
    with pytest.raises(ConfirmationRequired, match="G1 has passed"):
        evidence_import(gate=gate, bundles=bundles, imported_by="ops")
    with pytest.raises(ConfirmationRequired, match="needs a reason"):
        evidence_import(gate=gate, bundles=bundles, imported_by="ops", confirmed=True)
    assert stored() == before and not AuditEntry.objects.filter(
        action="passed gate re-run").exists()

    # the command: refused without --confirm, the same words as run_gate's
    path = tmp_path / bundles[0][0]
    err = io.StringIO()
    with pytest.raises(SystemExit) as exit_info:
        call_command("import_evidence", engagement.name, "G1", str(path), stderr=err)
    assert exit_info.value.code == 2 and "G1 has passed" in err.getvalue()
    assert "--confirm --reason" in err.getvalue() and stored() == before

    # the page: the confirm box and the reason are asked for
    user = django_user_model.objects.create_user("eng", password="pw-eng-1")
    Membership.objects.create(user=user, role=Membership.Role.ENGINEER)
    client.force_login(user)
    url = f"/engagements/{engagement.name}/gates/G1/evidence/"
    page = client.get(url)
    assert b'name="confirm"' in page.content and b'name="reason"' in page.content
    upload = io.BytesIO(bundles[0][1])
    upload.name = bundles[0][0]
    refused = client.post(url, {"bundles": upload})
    assert b"Tick the box to confirm" in refused.content and stored() == before

    run = evidence_import(gate=gate, bundles=bundles, imported_by="ops", confirmed=True,
                          reason="customer re-collected after a firmware update")
    entry = AuditEntry.objects.get(action="passed gate re-run")
    assert entry.actor == "ops" and entry.reason.startswith("customer re-collected")
    assert entry.details["gate_run"] == run.id and run.reason == entry.reason
    assert run.origin == GateRun.Origin.IMPORTED and run.decision.outcome == "stopped"


def test_the_upload_page_refuses_more_bundles_than_allowed(gate, client, django_user_model):
    from acceptance.models import Membership

    user = django_user_model.objects.create_user("eng", password="pw-eng-1")
    Membership.objects.create(user=user, role=Membership.Role.ENGINEER)
    client.force_login(user)
    uploads = []
    for i in range(evidence.MAX_BUNDLES + 1):
        upload = io.BytesIO(b"x")
        upload.name = f"b{i}.tar.gz"
        uploads.append(upload)
    before = stored()
    page = client.post(f"/engagements/{gate.engagement.name}/gates/G1/evidence/",
                       {"bundles": uploads})
    assert page.status_code == 200 and b"17 bundles: at most 16 in one import" in page.content
    assert stored() == before
