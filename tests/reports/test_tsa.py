"""SIGNING_TSA_URL: the report signature carries an RFC 3161 timestamp from a real HTTP
timestamp authority (pyHanko's DummyTimeStamper behind http.server on 127.0.0.1)."""

import threading
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from asn1crypto import keys as asn1_keys
from asn1crypto import tsp
from asn1crypto import x509 as asn1_x509
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from pyhanko.sign.timestamps import DummyTimeStamper

from reports.signing import sign_pdf, verify_pdf


def _tsa_identity():
    now = datetime.now(UTC)
    root_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    root_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "Test TSA Root")])
    root = (x509.CertificateBuilder().subject_name(root_name).issuer_name(root_name)
            .public_key(root_key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - timedelta(minutes=5)).not_valid_after(now + timedelta(days=30))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .sign(root_key, hashes.SHA256()))
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "Test TSA")]))
            .issuer_name(root_name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - timedelta(minutes=5)).not_valid_after(now + timedelta(days=30))
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.TIME_STAMPING]),
                           critical=True)
            .sign(root_key, hashes.SHA256()))

    def asn1(c):
        return asn1_x509.Certificate.load(c.public_bytes(serialization.Encoding.DER))

    key_info = asn1_keys.PrivateKeyInfo.load(key.private_bytes(
        serialization.Encoding.DER, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption()))
    return asn1(root), asn1(cert), key_info


@pytest.fixture
def tsa():
    """A timestamp authority on 127.0.0.1: (url, root certificate, list of requests served)."""
    root, cert, key = _tsa_identity()
    stamper = DummyTimeStamper(tsa_cert=cert, tsa_key=key, certs_to_embed=[root])
    served = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 - http.server's name
            body = self.rfile.read(int(self.headers["Content-Length"]))
            served.append(self.headers.get("Content-Type"))
            response = stamper.request_tsa_response(tsp.TimeStampReq.load(body)).dump()
            self.send_response(200)
            self.send_header("Content-Type", "application/timestamp-reply")
            self.send_header("Content-Length", str(len(response)))
            self.end_headers()
            self.wfile.write(response)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/", root, served
    server.shutdown()
    server.server_close()


def test_it_timestamps_the_signature_when_a_tsa_is_configured(settings, tsa, g1_pdf, signer,
                                                              roots):
    url, tsa_root, served = tsa
    settings.SIGNING_TSA_URL = url
    before = datetime.now(UTC)
    signed = sign_pdf(g1_pdf, signer=signer)
    # pyHanko asks once to size the signature container, then for the real token
    assert served and set(served) == {"application/timestamp-query"}
    result = verify_pdf(signed, roots=roots, tsa_roots=[tsa_root])
    assert result.valid, result.summary
    (sig,) = result.signatures
    assert sig.timestamp is not None and sig.timestamp_ok is True
    assert before - timedelta(seconds=5) <= sig.timestamp <= datetime.now(UTC)
    assert "(timestamp " in result.summary


def test_a_timestamp_from_an_untrusted_tsa_is_reported(settings, tsa, g1_pdf, signer, roots):
    url, _, _ = tsa
    settings.SIGNING_TSA_URL = url
    result = verify_pdf(sign_pdf(g1_pdf, signer=signer), roots=roots, tsa_roots=[])
    (sig,) = result.signatures
    assert sig.timestamp is not None and sig.timestamp_ok is False
    assert not result.valid and "timestamp token does not validate" in result.summary


def test_it_signs_without_a_timestamp_when_no_tsa_is_set(settings, g1_pdf, signer, roots):
    settings.SIGNING_TSA_URL = ""
    (sig,) = verify_pdf(sign_pdf(g1_pdf, signer=signer), roots=roots).signatures
    assert sig.timestamp is None and sig.timestamp_ok is None


def test_an_unreachable_tsa_fails_the_signing_instead_of_signing_without_it(settings, g1_pdf,
                                                                            signer):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    settings.SIGNING_TSA_URL = f"http://127.0.0.1:{port}/"
    settings.SIGNING_TSA_TIMEOUT_S = 2
    with pytest.raises(Exception, match="(?i)timestamp|connect|refused"):
        sign_pdf(g1_pdf, signer=signer)
