"""SSH credentials are stored encrypted and never shown."""

import pytest
from django.core.exceptions import ValidationError

from acceptance.models import Credential, host_key_fingerprint

PRIVATE = (
    "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n"
    "-----END OPENSSH PRIVATE KEY-----\n"
)


def test_it_stores_the_private_key_encrypted_and_reads_it_back(db):
    credential = Credential.from_secret("node-key", PRIVATE, passphrase="hunter2")
    credential.save()
    stored = Credential.objects.get(name="node-key")
    raw = bytes(stored.private_key_encrypted)
    assert b"OPENSSH PRIVATE KEY" not in raw and b"b3BlbnNzaC" not in raw
    assert b"hunter2" not in bytes(stored.passphrase_encrypted)
    assert stored.private_key() == PRIVATE
    assert stored.passphrase() == "hunter2"
    assert "OPENSSH" not in repr(stored) and "OPENSSH" not in str(stored)


def test_it_refuses_to_open_a_secret_with_another_key(db, settings):
    from cryptography.fernet import Fernet

    from acceptance import crypto

    credential = Credential.from_secret("k", PRIVATE)
    crypto._fernet.cache_clear()
    settings.CREDENTIALS_KEY = Fernet.generate_key().decode()
    try:
        with pytest.raises(crypto.CredentialDecryptError, match="does not decrypt"):
            credential.private_key()
    finally:
        crypto._fernet.cache_clear()


def test_it_fingerprints_host_keys_like_openssh():
    # ssh-keygen -lf of this key line prints SHA256:... (computed from the base64 blob)
    import base64
    import hashlib

    blob = base64.b64encode(b"\x00\x00\x00\x0bssh-ed25519" + b"\x00\x00\x00\x20" + bytes(32))
    line = f"ssh-ed25519 {blob.decode()} lab"
    expected = base64.b64encode(hashlib.sha256(base64.b64decode(blob)).digest()).decode()
    assert host_key_fingerprint(line) == "SHA256:" + expected.rstrip("=")
    with pytest.raises(ValidationError):
        host_key_fingerprint("not a key")
    with pytest.raises(ValidationError):
        host_key_fingerprint("ssh-ed25519 !!!notbase64")


def test_it_has_no_missing_migrations(db):
    from io import StringIO

    from django.core.management import call_command

    out = StringIO()
    call_command("makemigrations", "--check", "--dry-run", stdout=out)
    assert "No changes detected" in out.getvalue()
