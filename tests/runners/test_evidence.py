"""Evidence import: a collection script run on the (lab) node, its bundle verified whole and
decided exactly as the SSH run; tampered bundles refused with nothing stored."""

import hashlib
import io
import json
import tarfile

import pytest
from django.core.management import call_command

from acceptance.models import Engagement
from runners.evidence import EvidenceRefused, collection_script, evidence_import
from runners.lab.services import lab_up
from runners.models import GateRun, Measurement, ProbeRun
from runners.transport import SSHConnection

pytestmark = pytest.mark.slow


def collect_on_node(engagement, gate_code, tmp_path):
    """Run the gate's collection script on the lab node over SSH, as the customer would."""
    gate = engagement.gates.get(code=gate_code)
    bundles = []
    roles = {s["role"] for s in gate.probe_plan} - {"service"}
    for node in engagement.nodes.filter(role__in=roles):
        script = tmp_path / f"collect-{node.name}.py"
        script.write_text(collection_script(gate=gate, node=node))
        output = tmp_path / f"{node.name}.tar.gz"
        with SSHConnection(node.ssh_target()) as connection:
            result = connection.run(f"python3 {script} --output {output}", timeout=120)
        assert result.exit_code == 0, result.stderr.decode()
        bundles.append((output.name, output.read_bytes()))
    return gate, bundles


def rebuild(bundle: bytes, change) -> bytes:
    """Re-pack a bundle after ``change(files)`` edits the dict of name -> bytes."""
    with tarfile.open(fileobj=io.BytesIO(bundle), mode="r:gz") as archive:
        files = {m.name: archive.extractfile(m).read() for m in archive.getmembers()}
    change(files)
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as archive:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return out.getvalue()


def edit_manifest(edit):
    def change(files):
        manifest = json.loads(files["manifest.json"])
        edit(manifest, files)
        files["manifest.json"] = json.dumps(manifest).encode()
    return change


@pytest.fixture
def imported(lab, tmp_path):
    """A lab engagement (missing-drive) with G1 bundles collected on its node."""
    engagement, _ = lab("missing-drive")
    gate, bundles = collect_on_node(engagement, "G1", tmp_path)
    return engagement, gate, bundles


def test_it_decides_an_imported_bundle_as_the_ssh_run_of_the_same_scenario(imported, tmp_path):
    engagement, gate, bundles = imported
    run = evidence_import(gate=gate, bundles=bundles, imported_by="customer-ops")
    assert run.origin == GateRun.Origin.IMPORTED and run.state == GateRun.State.DONE
    assert run.decision.outcome == "stopped"
    verdicts = {v.criterion.key: (v.verdict, v.measured_value) for v in run.decision.verdicts.all()}
    assert verdicts["drive-count"] == ("fail", 23.0)
    assert run.probe_runs.filter(origin="imported", node__isnull=False).count() == 47
    assert run.decision.report.simulated

    # The same scenario over SSH, on a twin engagement: the same verdicts.
    twin, _ = lab_up(scenario_name="missing-drive", engagement_name="lab-missing-drive-ssh")
    with pytest.raises(SystemExit):
        call_command("run_gate", twin.name, "G1", stdout=io.StringIO(), stderr=io.StringIO())
    ssh_run = GateRun.objects.get(gate__engagement=twin)
    assert ssh_run.decision.outcome == run.decision.outcome
    assert {v.criterion.key: (v.verdict, v.measured_value)
            for v in ssh_run.decision.verdicts.all()} == verdicts


def test_it_runs_the_g2_collection_with_the_plan_parameters(lab, tmp_path):
    engagement, _ = lab("slow-link")
    engagement.gates.filter(code="G1").update(state="passed")
    gate, bundles = collect_on_node(engagement, "G2", tmp_path)
    run = evidence_import(gate=gate, bundles=bundles, imported_by="customer-ops")
    assert run.decision.outcome == "stopped"
    efficiency = Measurement.objects.get(gate_run=run, metric="line_efficiency")
    assert efficiency.value == pytest.approx(0.76)


def assert_refused(gate, bundles, match):
    before = (GateRun.objects.count(), ProbeRun.objects.count(), Measurement.objects.count())
    with pytest.raises(EvidenceRefused, match=match):
        evidence_import(gate=gate, bundles=bundles, imported_by="x")
    assert (GateRun.objects.count(), ProbeRun.objects.count(),
            Measurement.objects.count()) == before


def test_it_refuses_a_bundle_with_one_changed_byte(imported):
    _, gate, [(name, data)] = imported

    def flip(files):
        path = "runs/001-nvme_inventory.stdout"
        raw = bytearray(files[path])
        raw[len(raw) // 2] ^= 0x01
        files[path] = bytes(raw)

    assert_refused(gate, [(name, rebuild(data, flip))], "sha256 of runs/001-nvme_inventory")


def test_it_refuses_path_tricks_and_links(imported):
    _, gate, [(name, data)] = imported

    def dotdot(files):
        files["../../etc/cron.d/x"] = b"* * * * * root true\n"

    assert_refused(gate, [(name, rebuild(data, dotdot))], "unsafe path '../../etc/cron.d/x'")

    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as archive:
        link = tarfile.TarInfo("manifest.json")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
        archive.addfile(link)
    assert_refused(gate, [(name, out.getvalue())], "not a regular file")
    assert_refused(gate, [(name, b"not a tar at all")], "not a readable tar.gz")


def test_it_refuses_a_bundle_for_another_engagement_or_gate(imported):
    _, gate, [(name, data)] = imported
    other = edit_manifest(lambda m, f: m.update(engagement="someone-else"))
    assert_refused(gate, [(name, rebuild(data, other))], "not lab-missing-drive")
    wrong_gate = edit_manifest(lambda m, f: m.update(gate="G2"))
    assert_refused(gate, [(name, rebuild(data, wrong_gate))], "for gate 'G2', not G1")


def test_it_refuses_commands_or_parameters_not_from_the_probe_definitions(imported):
    _, gate, [(name, data)] = imported

    def command(manifest, files):
        manifest["runs"][0]["command"] = "nvme list -o json; curl http://evil"

    assert_refused(gate, [(name, rebuild(data, edit_manifest(command)))],
                   "not the one the probe definition builds")

    def parameters(manifest, files):
        manifest["runs"][1]["parameters"]["max_polls"] = 1

    assert_refused(gate, [(name, rebuild(data, edit_manifest(parameters)))],
                   "parameters differ from the gate's plan")


def test_it_refuses_unlisted_files_and_missing_nodes(imported, lab):
    engagement, gate, [(name, data)] = imported

    def extra(files):
        files["runs/999-nvme_inventory.stdout"] = b"{}"

    assert_refused(gate, [(name, rebuild(data, extra))], "not listed in the manifest")
    assert_refused(gate, [], "no bundle given")
    assert_refused(gate, [(name, data), (name, data)], "several bundles")


def test_it_refuses_an_import_on_a_stopped_engagement(imported):
    from gates.services import GateRefused

    engagement, gate, bundles = imported
    evidence_import(gate=gate, bundles=bundles, imported_by="x")
    with pytest.raises(GateRefused, match="stopped"):
        evidence_import(gate=gate, bundles=bundles, imported_by="x")


def test_the_import_command_prints_the_decision_and_refuses_bad_bundles(imported, tmp_path):
    engagement, gate, [(name, data)] = imported
    bad = tmp_path / "bad.tar.gz"
    bad.write_bytes(rebuild(data, edit_manifest(lambda m, f: m.update(gate="G2"))))
    err = io.StringIO()
    with pytest.raises(SystemExit) as exit_info:
        call_command("import_evidence", engagement.name, "G1", str(bad), stderr=err)
    assert exit_info.value.code == 2 and err.getvalue().startswith("refused: bad.tar.gz")
    good = tmp_path / "good.tar.gz"
    good.write_bytes(data)
    out = io.StringIO()
    with pytest.raises(SystemExit) as exit_info:
        call_command("import_evidence", engagement.name, "G1", str(good), stdout=out)
    assert exit_info.value.code == 1
    assert "IMPORTED" in out.getvalue() and "report: " in out.getvalue()


def test_the_upload_page_needs_an_engineer_and_imports(imported, client, django_user_model):
    from acceptance.models import Membership

    engagement, gate, [(name, data)] = imported
    url = f"/engagements/{engagement.name}/gates/G1/evidence/"
    assert client.get(url).status_code == 302  # anonymous: to the login page
    user = django_user_model.objects.create_user("visitor", password="pw-visitor-1")
    client.force_login(user)
    assert client.get(url).status_code == 403
    script_url = url.replace("evidence/", "collect/lab-array-controller.py")
    assert client.get(script_url).status_code == 403
    Membership.objects.create(user=user, role=Membership.Role.ENGINEER)
    client.force_login(django_user_model.objects.get(pk=user.pk))
    page = client.get(url)
    assert page.status_code == 200 and b"lab-array-controller" in page.content
    script = client.get(script_url)
    assert script.status_code == 200 and script["Content-Disposition"].endswith('.py"')
    upload = io.BytesIO(rebuild(data, edit_manifest(lambda m, f: m.update(node="nobody"))))
    upload.name = "tampered.tar.gz"
    refused = client.post(url, {"bundles": upload})
    assert refused.status_code == 200 and b"Refused, nothing was stored" in refused.content
    good = io.BytesIO(data)
    good.name = name
    response = client.post(url, {"bundles": good}, follow=True)
    assert b"drive_count &gt;= 24 measured 23" in response.content
    assert Engagement.objects.get(pk=engagement.pk).state == "stopped"


def test_reevaluate_shows_a_difference_without_touching_the_record(imported):
    engagement, gate, bundles = imported
    run = evidence_import(gate=gate, bundles=bundles, imported_by="x")
    out = io.StringIO()
    with pytest.raises(SystemExit) as exit_info:
        call_command("reevaluate", str(run.id), stdout=out)
    assert exit_info.value.code is None or exit_info.value.code == 0
    # Pretend an older parser had read 24 drives: today's parser reads 23 again.
    Measurement.objects.filter(gate_run=run, metric="drive_count", derived=False).update(value=24)
    out = io.StringIO()
    with pytest.raises(SystemExit) as exit_info:
        call_command("reevaluate", str(run.id), stdout=out)
    text = out.getvalue()
    assert exit_info.value.code == 1
    assert "drive_count {} 24 → 23 1" in text
    assert "DIFFERENT" in text
    assert Measurement.objects.get(gate_run=run, metric="drive_count",
                                   derived=False).value == 24  # untouched
    assert run.decision.outcome == "stopped"
    digest = hashlib.sha256(open(run.decision.report.path, "rb").read()).hexdigest()
    assert digest == run.decision.report.sha256
