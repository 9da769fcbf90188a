"""SSH key pairs for enrolment and secrecy tests (Ed25519, optionally passphrase-protected)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey


@dataclass(frozen=True)
class KeyPair:
    private: str  # OpenSSH private key text
    public: str  # authorized_keys line
    passphrase: str | None

    def secrets(self) -> list[str]:
        """Every piece of the private key that must never be shown: the body lines and the
        passphrase."""
        body = [line for line in self.private.splitlines() if not line.startswith("-----")]
        return [*body, *([self.passphrase] if self.passphrase else [])]

    def authorise_on(self, lab_directory: Path) -> None:
        with open(lab_directory / "authorized_keys", "a") as keys:
            keys.write(self.public + "\n")

    def write(self, path: Path) -> Path:
        path.write_text(self.private)
        path.chmod(0o600)
        return path


def keypair(passphrase: str | None = None) -> KeyPair:
    key = Ed25519PrivateKey.generate()
    encryption = (serialization.BestAvailableEncryption(passphrase.encode()) if passphrase
                  else serialization.NoEncryption())
    private = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
                                encryption).decode()
    public = key.public_key().public_bytes(serialization.Encoding.OpenSSH,
                                           serialization.PublicFormat.OpenSSH).decode()
    return KeyPair(private, public, passphrase)
