"""The verifier against tampered reports (one changed byte, a removed attachment, an appended
incremental update), a customer countersignature, the embedded evidence read with pypdf, and
pyHanko's own command line on our signature."""

import hashlib
import io
import json
import subprocess
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from pyhanko.pdf_utils import generic
from pyhanko.pdf_utils.incremental_writer import IncrementalPdfFileWriter
from pypdf import PdfReader, PdfWriter

from reports.evidence import SUMMARY_NAME, evidence_check
from reports.signing import DEV_SIGNER_NAME, sign_pdf, verify_pdf
from tests.reports.samples import g1_stopped


def _verify_command(path: Path, *args: str) -> tuple[int, str]:
    out = StringIO()
    try:
        call_command("verify_report", str(path), *args, stdout=out)
    except SystemExit as e:
        return int(e.code or 0), out.getvalue()
    return 0, out.getvalue()


def _incremental(data: bytes, change) -> bytes:
    writer = IncrementalPdfFileWriter(io.BytesIO(data))
    change(writer)
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def _remove_attachment(writer: IncrementalPdfFileWriter, name: str) -> None:
    tree = writer.root["/Names"]["/EmbeddedFiles"]
    names = [tree["/Names"].raw_get(i) for i in range(len(tree["/Names"]))]
    index = [str(n) for n in names[::2]].index(name) * 2
    kept = generic.ArrayObject(names[:index] + names[index + 2:])
    tree[generic.NameObject("/Names")] = kept
    writer.update_container(tree)  # the EmbeddedFiles tree is an indirect object here


# --- the embedded evidence ---------------------------------------------------------------------


def test_the_evidence_extracts_with_pypdf_and_hashes_to_the_summary(signed_g1_pdf: bytes):
    reader = PdfReader(io.BytesIO(signed_g1_pdf))
    files = {name: contents[0] for name, contents in reader.attachments.items()}
    summary = json.loads(files.pop(SUMMARY_NAME))
    runs = g1_stopped().runs
    assert len(summary["runs"]) == len(runs) == len(files) == 6
    for entry, run in zip(summary["runs"], runs, strict=True):
        assert files[entry["attachment"]] == run.raw_output
        assert hashlib.sha256(files[entry["attachment"]]).hexdigest() == entry["sha256"]
        assert entry["sha256"] == run.sha256
    assert evidence_check(signed_g1_pdf).ok


def test_the_printed_appendix_names_each_attachment_with_its_sha256(signed_g1_pdf, tmp_path):
    path = tmp_path / "g1.pdf"
    path.write_bytes(signed_g1_pdf)
    text = subprocess.run(["pdftotext", str(path), "-"], capture_output=True, text=True,
                          check=True).stdout.replace("\n", "")
    summary = json.loads(PdfReader(io.BytesIO(signed_g1_pdf)).attachments[SUMMARY_NAME][0])
    for entry in summary["runs"]:
        assert entry["sha256"] in text.replace(" ", "")


# --- tamper cases ------------------------------------------------------------------------------


def test_it_reports_one_changed_byte(signed_g1_pdf: bytes, roots, tmp_path, no_configured_signer):
    tampered = bytearray(signed_g1_pdf)
    # a byte inside the first page's content stream, well inside the signed range
    position = signed_g1_pdf.index(b"stream", len(signed_g1_pdf) // 4) + 40
    tampered[position] ^= 0x01
    result = verify_pdf(bytes(tampered), roots=roots)
    assert not result.valid and not result.intact
    assert result.modified_after_signing
    assert "changed after signing" in result.summary
    path = tmp_path / "one-byte.pdf"
    path.write_bytes(bytes(tampered))
    code, out = _verify_command(path)
    assert code == 1
    assert out.startswith("NOT valid: ")
    assert "NOT intact" in out and "modified after signing: yes" in out


def test_it_reports_an_attachment_removed_in_an_incremental_update(signed_g1_pdf, roots):
    summary = json.loads(PdfReader(io.BytesIO(signed_g1_pdf)).attachments[SUMMARY_NAME][0])
    victim = summary["runs"][2]["attachment"]
    tampered = _incremental(signed_g1_pdf, lambda w: _remove_attachment(w, victim))
    assert tampered.startswith(signed_g1_pdf)
    result = verify_pdf(tampered, roots=roots)
    assert not result.valid
    assert result.intact  # the signed bytes are untouched; what follows them is the problem
    assert result.modified_after_signing
    assert not result.evidence.ok
    assert f"run 3: attachment {victim} is missing" in result.summary
    assert "does not cover the whole document" in result.summary


def test_it_reports_an_attachment_removed_by_rewriting_the_file(signed_g1_pdf, roots):
    reader = PdfReader(io.BytesIO(signed_g1_pdf))
    summary = json.loads(reader.attachments[SUMMARY_NAME][0])
    writer = PdfWriter()
    for page in reader.pages:
        writer.add_page(page)
    for name, contents in reader.attachments.items():
        if name != summary["runs"][0]["attachment"]:
            writer.add_attachment(name, contents[0])
    out = io.BytesIO()
    writer.write(out)
    result = verify_pdf(out.getvalue(), roots=roots)
    assert not result.valid
    # the rewrite drops the signature itself: nothing the service signed is left
    assert result.summary == "the document carries no signature"
    check = evidence_check(out.getvalue())
    assert not check.ok and "run 1: attachment" in check.summary and "is missing" in check.summary


def test_it_reports_an_incremental_update_appended_after_signing(signed_g1_pdf, roots, tmp_path,
                                                                 no_configured_signer):
    def retitle(writer):
        info = writer.trailer["/Info"] if "/Info" in writer.trailer else None
        if info is None:
            info = generic.DictionaryObject()
            writer.trailer[generic.NameObject("/Info")] = writer.add_object(info)
        else:
            info = info.get_object()
        info[generic.NameObject("/Title")] = generic.TextStringObject("G1 PASSED (edited)")
        writer.update_container(info) if "/Info" in writer.trailer else None

    tampered = _incremental(signed_g1_pdf, retitle)
    assert tampered.startswith(signed_g1_pdf) and len(tampered) > len(signed_g1_pdf)
    result = verify_pdf(tampered, roots=roots)
    assert not result.valid
    assert result.intact and result.modified_after_signing
    assert "does not cover the whole document" in result.summary
    (sig,) = result.signatures
    assert not sig.whole_file and not sig.later_changes_allowed
    path = tmp_path / "appended.pdf"
    path.write_bytes(tampered)
    code, out = _verify_command(path)
    assert code == 1 and "modified after signing: yes" in out


def test_it_reports_bytes_appended_after_the_signed_file(signed_g1_pdf, roots):
    result = verify_pdf(signed_g1_pdf + b"\n% trailing junk\n", roots=roots)
    assert not result.valid and result.modified_after_signing


# --- countersignature --------------------------------------------------------------------------


def test_a_customer_countersignature_keeps_ours_valid(countersigned_g1_pdf, roots,
                                                      customer_trust):
    result = verify_pdf(countersigned_g1_pdf, roots=roots, customer=customer_trust)
    assert result.valid, result.summary
    ours, theirs = result.signatures
    assert (ours.field, ours.signer, ours.intact, ours.trusted) == (
        "AcceptanceSignature", DEV_SIGNER_NAME, True, True)
    assert not ours.whole_file and ours.later_changes_allowed
    assert ours.later_changes == "later signatures were added (allowed)"
    assert (theirs.field, theirs.whole_file, theirs.trusted) == ("CustomerSignature", True, True)
    assert result.summary.startswith("2 signatures intact and trusted; signed by "
                                     f"{DEV_SIGNER_NAME} at ")
    assert not result.modified_after_signing


def test_a_countersignature_from_an_unknown_key_is_not_trusted(countersigned_g1_pdf, roots):
    result = verify_pdf(countersigned_g1_pdf, roots=roots)
    assert not result.valid
    assert result.signatures[0].trusted and not result.signatures[1].trusted
    # with no customer certificate to check it against it is neither trusted nor refused:
    # it cannot be checked, and the report is not valid
    assert "CustomerSignature" in result.summary and ("cannot be checked: no customer "
                                                      "certificate is registered") in result.summary


def test_the_countersign_command_writes_a_new_file(db, g1_pdf, signer, customer_dir, tmp_path,
                                                   roots, customer_trust, customer_cert_pem,
                                                   monkeypatch):
    # db: verify_report looks the report's engagement up for its customer certificates. A
    # fresh signature, not the session's: pytest-django runs db tests first, and
    # test_it_verifies_a_signed_report wants the session's signature made just before it.
    signed_g1_pdf = sign_pdf(g1_pdf, signer=signer)
    source = tmp_path / "signed.pdf"
    source.write_bytes(signed_g1_pdf)
    out_path = tmp_path / "countersigned.pdf"
    out = StringIO()
    call_command("countersign_report", str(source), "--pkcs12", str(customer_dir / "signer.p12"),
                 "--passphrase-file", str(customer_dir / "signer.pass"), "--out", str(out_path),
                 "--trust-root", str(roots_path(roots, tmp_path)), stdout=out)
    assert out.getvalue().strip() == f"countersigned: {out_path}"
    data = out_path.read_bytes()
    assert data.startswith(signed_g1_pdf)
    assert verify_pdf(data, roots=roots, customer=customer_trust).valid
    leaf = tmp_path / "customer-cert.pem"
    leaf.write_bytes(customer_cert_pem)
    code, text = _verify_command(out_path, "--trust-root", str(Path(roots_path(roots, tmp_path))),
                                 "--customer-cert", str(leaf))
    assert code == 0, text
    assert "signature 2: field CustomerSignature" in text


@pytest.mark.parametrize("damage", ["changed byte", "unsigned", "untrusted"])
def test_the_countersign_command_refuses_a_report_that_does_not_verify(
        damage, signed_g1_pdf, g1_pdf, customer_dir, tmp_path, roots):
    from django.core.management.base import CommandError

    data = {"changed byte": _flip_middle(signed_g1_pdf), "unsigned": g1_pdf,
            "untrusted": signed_g1_pdf}[damage]
    source = tmp_path / "report.pdf"
    source.write_bytes(data)
    # "untrusted": the customer names only their own CA as the vendor's root.
    trust = customer_dir / "ca.pem" if damage == "untrusted" else roots_path(roots, tmp_path)
    with pytest.raises(CommandError, match="does not verify, nothing countersigned"):
        call_command("countersign_report", str(source), "--pkcs12",
                     str(customer_dir / "signer.p12"), "--passphrase-file",
                     str(customer_dir / "signer.pass"), "--out", str(tmp_path / "o.pdf"),
                     "--trust-root", str(trust))
    assert not (tmp_path / "o.pdf").exists()


def test_the_countersign_command_refuses_an_out_path_in_a_missing_directory(
        signed_g1_pdf, customer_dir, tmp_path):
    from django.core.management.base import CommandError

    source = tmp_path / "signed.pdf"
    source.write_bytes(signed_g1_pdf)
    with pytest.raises(CommandError, match="is not a directory"):
        call_command("countersign_report", str(source), "--pkcs12",
                     str(customer_dir / "signer.p12"), "--out", str(tmp_path / "no" / "o.pdf"))


def _flip_middle(data: bytes) -> bytes:
    middle = len(data) // 2
    return data[:middle] + bytes([data[middle] ^ 0x01]) + data[middle + 1:]


def roots_path(roots, tmp_path: Path) -> Path:
    from asn1crypto import pem

    path = tmp_path / "roots.pem"
    path.write_bytes(b"".join(pem.armor("CERTIFICATE", r.dump()) for r in roots))
    return path


def test_the_countersign_command_refuses_a_wrong_passphrase(signed_g1_pdf, customer_dir,
                                                            tmp_path, monkeypatch):
    from django.core.management.base import CommandError

    source = tmp_path / "signed.pdf"
    source.write_bytes(signed_g1_pdf)
    monkeypatch.setenv("COUNTERSIGN_PASSPHRASE", "wrong")
    with pytest.raises(CommandError, match="wrong passphrase"):
        call_command("countersign_report", str(source), "--pkcs12",
                     str(customer_dir / "signer.p12"), "--out", str(tmp_path / "o.pdf"))
    assert not (tmp_path / "o.pdf").exists()


# --- pyHanko's own command line ----------------------------------------------------------------


def test_pyhanko_cli_validates_our_signature_against_the_vendor_ca(signed_g1_pdf, signing_dir,
                                                                   tmp_path):
    path = tmp_path / "signed.pdf"
    path.write_bytes(signed_g1_pdf)
    pyhanko = Path(subprocess.sys.executable).parent / "pyhanko"
    done = subprocess.run(
        [str(pyhanko), "sign", "validate", "--no-revocation-check", "--trust-replace",
         "--trust", str(signing_dir / "ca.pem"), str(path)],
        capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert ":INTACT:TRUSTED,UNTOUCHED" in done.stdout
    assert done.stdout.startswith("AcceptanceSignature:")


def test_pyhanko_cli_rejects_a_changed_byte(signed_g1_pdf, signing_dir, tmp_path):
    tampered = bytearray(signed_g1_pdf)
    tampered[signed_g1_pdf.index(b"stream", len(signed_g1_pdf) // 4) + 40] ^= 0x01
    path = tmp_path / "tampered.pdf"
    path.write_bytes(bytes(tampered))
    pyhanko = Path(subprocess.sys.executable).parent / "pyhanko"
    done = subprocess.run(
        [str(pyhanko), "sign", "validate", "--no-revocation-check", "--trust-replace",
         "--trust", str(signing_dir / "ca.pem"), str(path)],
        capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode != 0
    assert ":INTACT:" not in done.stdout
