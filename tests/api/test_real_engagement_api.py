"""The real-engagement journey through the REST API with tokens (issue 20): create acme-prod for
Acme with one array, invite an engineer and a customer (mail by a real SMTP server on
127.0.0.1), enrol the array controller — a loopback sshd running this machine's real tools —
upload the BOM as CSV and tick it, start G1, poll it, read the decision (stopped: 0 of 24
drives), download the signed report, sign off as both parties (version 2), re-open. Refusals
on the way: a bad CSV, a wrong fingerprint, a customer of another organisation (404)."""

import hashlib
import shutil
import time

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from gates.services import engagement_create
from reports.signing import verify_pdf
from tests.transport.sshd import host_key_fingerprint_of, real_node
from tests.web.conftest import smtp_server  # noqa: F401 (fixture)

pytestmark = pytest.mark.skipif(not shutil.which("nvme", path="/usr/sbin:/usr/bin"),
                                reason="nvme-cli is not installed (scripts/setup)")
BOM_CSV = (b"description,quantity,part number,serials\n"
           b"FX100 array (24 x 7.68 TB),1,FX100-24,FX24-0001\n")


def csv_file(data: bytes) -> SimpleUploadedFile:
    return SimpleUploadedFile("bom.csv", data, content_type="text/csv")


def test_a_real_engagement_through_the_api(transactional_db, users, client_for, settings,
                                           smtp_server, tmp_path):  # noqa: F811
    pm, engineer, customer = client_for("pm"), client_for("engineer"), client_for("customer")
    foreign = client_for("foreign")

    created = pm.post("/api/engagements/", {
        "name": "acme-prod", "customer": "Acme", "start_date": "2026-12-01",
        "arrays": [{"model": "FX100", "serial": "FX24-0001", "expected_drive_count": 24,
                    "link_speed_mbps": 100000}]}, format="json")
    assert created.status_code == 201, created.content
    assert [g["code"] for g in created.json()["gates"]] == ["G1", "G2", "G3", "G4"]

    for address, role in (("erin@vendor.example", "engineer"),
                          ("carla@acme.example", "customer")):
        invited = pm.post("/api/engagements/acme-prod/people/", {"email": address, "role": role},
                          format="json")
        assert invited.status_code == 201, invited.content
        assert invited.json()["invitation"]["status"] == "pending"
        assert "/accounts/invitation/" in smtp_server.body(smtp_server.to(address)[0])
    assert customer.post("/api/engagements/acme-prod/people/",
                         {"email": "x@acme.example", "role": "customer"},
                         format="json").status_code == 403

    node = real_node(settings.LAB_DIR / "acme-array-ctl")
    enrol = {"name": "array-ctl", "role": "array", "address": "127.0.0.1", "port": node.port,
             "ssh_user": node.user, "private_key": node.client_private_key,
             "fingerprint": host_key_fingerprint_of(node), "array": "FX24-0001"}
    wrong = engineer.post("/api/engagements/acme-prod/nodes/",
                          {**enrol, "fingerprint": "SHA256:" + "A" * 43}, format="json")
    assert wrong.status_code == 409 and "not enrolled" in wrong.json()["detail"]
    assert pm.post("/api/engagements/acme-prod/nodes/", enrol,
                   format="json").status_code == 403
    enrolled = engineer.post("/api/engagements/acme-prod/nodes/", enrol, format="json")
    assert enrolled.status_code == 201, enrolled.content
    assert enrolled.json()["host_key_fingerprint"] == enrol["fingerprint"]
    assert enrolled.json()["array"] == "FX24-0001"

    bad = pm.post("/api/engagements/acme-prod/bom/",
                  {"file": csv_file(BOM_CSV + b"cable,many,C-1,\n")}, format="multipart")
    assert bad.status_code == 400 and "line 3" in bad.json()["file"][0]
    uploaded = pm.post("/api/engagements/acme-prod/bom/", {"file": csv_file(BOM_CSV)},
                       format="multipart")
    assert uploaded.status_code == 201, uploaded.content
    assert [(i["position"], i["serials"]) for i in uploaded.json()] == [(1, ["FX24-0001"])]
    ticked = pm.post("/api/engagements/acme-prod/bom/1/tick/")
    assert ticked.status_code == 200 and ticked.json()["ticked_by"] == "pm"

    started = engineer.post("/api/engagements/acme-prod/gates/G1/runs/", {}, format="json")
    assert started.status_code == 201, started.content
    run_id = started.json()["id"]
    deadline = time.monotonic() + 60
    while True:
        run = engineer.get(f"/api/gate-runs/{run_id}/").json()
        if run["state"] in ("done", "failed", "cancelled") or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert run["state"] == "done", run
    decision = engineer.get(f"/api/decisions/{run['decision']}/").json()
    assert decision["outcome"] == "stopped"
    verdicts = {v["metric"]: (v["verdict"], v["measured_value"]) for v in decision["verdicts"]}
    assert verdicts["drive_count"] == ("fail", 0.0)
    assert verdicts["self_test_failures"] == ("insufficient", None)
    probes = engineer.get(f"/api/probe-runs/?gate_run={run_id}&probe=nvme_inventory").json()
    assert probes["results"][0]["simulated"] is False

    report = customer.get(f"/api/reports/{decision['report']}/").json()
    download = customer.get(f"/api/reports/{report['id']}/download/")
    assert download.status_code == 200
    pdf = b"".join(download.streaming_content) if download.streaming else download.content
    assert hashlib.sha256(pdf).hexdigest() == report["sha256"] and verify_pdf(pdf).valid
    assert foreign.get(f"/api/reports/{report['id']}/").status_code == 404
    assert foreign.get("/api/engagements/acme-prod/").status_code == 404

    assert pm.post(f"/api/reports/{report['id']}/signoffs/", {"comment": ""},
                   format="json").status_code == 201
    second = customer.post(f"/api/reports/{report['id']}/signoffs/",
                           {"comment": "0 drives seen; agreed"}, format="json")
    assert second.status_code == 201 and second["X-New-Report"]
    versions = customer.get(f"/api/reports/{report['id']}/versions/").json()
    assert [v["version"] for v in versions] == [1, 2]
    assert int(second["X-New-Report"]) == versions[-1]["id"]

    assert pm.post("/api/engagements/acme-prod/reopen/", {"reason": ""},
                   format="json").status_code == 400
    reopened = pm.post("/api/engagements/acme-prod/reopen/",
                       {"reason": "24 drives delivered on a second pallet"}, format="json")
    assert reopened.status_code == 200 and reopened.json()["state"] == "active"
    gates = pm.get("/api/engagements/acme-prod/").json()["gates"]
    assert {g["code"]: g["state"] for g in gates}["G1"] == "pending"
    assert pm.post("/api/engagements/acme-prod/reopen/", {"reason": "again"},
                   format="json").status_code == 409


def test_the_set_up_calls_answer_by_role_and_organisation(users, client_for):
    engagement_create(name="acme-prod", customer="Acme", start_date="2026-12-01")
    engagement_create(name="globex-1", customer="Globex", start_date="2026-12-01")
    calls = [("/api/engagements/acme-prod/bom/", {"file": csv_file(BOM_CSV)}, "multipart"),
             ("/api/engagements/acme-prod/bom/1/tick/", {}, "json"),
             ("/api/engagements/acme-prod/reopen/", {"reason": "why"}, "json"),
             ("/api/engagements/acme-prod/nodes/", {}, "json")]
    for url, body, kind in calls:
        assert client_for(None).post(url, body, format=kind).status_code in (401, 403)
        assert client_for("customer").post(url, body, format=kind).status_code == 403, url
        assert client_for("foreign").post(url, body, format=kind).status_code == 404, url
    assert client_for("engineer").post(calls[0][0], {"file": csv_file(BOM_CSV)},
                                       format="multipart").status_code == 403
    missing = client_for("pm").post("/api/engagements/acme-prod/bom/", {}, format="multipart")
    assert missing.status_code == 400 and "file" in missing.json()
    assert client_for("pm").post("/api/engagements/acme-prod/bom/9/tick/").status_code == 404
    not_stopped = client_for("pm").post(calls[2][0], {"reason": "why"}, format="json")
    assert not_stopped.status_code == 409 and "not stopped" in not_stopped.json()["detail"]
    no_key = client_for("engineer").post(calls[3][0], {
        "name": "array-ctl", "role": "array", "address": "127.0.0.1", "ssh_user": "root",
        "fingerprint": "SHA256:x", "private_key": "not a key"}, format="json")
    assert no_key.status_code == 400 and "private_key" in no_key.json()


def test_a_node_of_an_unknown_role_is_refused_naming_the_roles(users, client_for):
    engagement_create(name="acme-prod", customer="Acme", start_date="2026-12-01")
    bad = client_for("engineer").post("/api/engagements/acme-prod/nodes/", {
        "name": "ctl-1", "role": "array_controller", "address": "127.0.0.1", "ssh_user": "root",
        "fingerprint": "SHA256:x"}, format="json")
    assert bad.status_code == 400
    assert bad.json()["role"] == [
        '"array_controller" is not a node role: one of array, inference, bastion.']
