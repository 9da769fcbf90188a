"""Encryption at rest for credentials (SSH private keys and their passphrases).

Fernet (AES-128-CBC + HMAC-SHA256, from ``cryptography``) with the key from
``ACCEPTANCE_CREDENTIALS_KEY``; in development a key is made once under ``VAR_DIR`` (mode 0600).
Raises ``ImproperlyConfigured`` for a malformed key and ``CredentialDecryptError`` when stored
ciphertext does not open with the configured key (never with the secret in the message).
"""

from functools import cache

from cryptography.fernet import Fernet, InvalidToken
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from acceptance.files import private_secret


class CredentialDecryptError(Exception):
    """The stored secret cannot be decrypted with the configured key."""


@cache
def _fernet() -> Fernet:
    key = settings.CREDENTIALS_KEY
    if not key:
        key = private_secret(settings.VAR_DIR / "credentials.key",
                             lambda: Fernet.generate_key().decode())
    try:
        return Fernet(key)
    except ValueError as error:
        raise ImproperlyConfigured(
            "ACCEPTANCE_CREDENTIALS_KEY must be 32 url-safe base64-encoded bytes "
            "(make one with cryptography.fernet.Fernet.generate_key())"
        ) from error


def encrypt(secret: str) -> bytes:
    return _fernet().encrypt(secret.encode())


def decrypt(token: bytes) -> str:
    try:
        return _fernet().decrypt(bytes(token)).decode()
    except InvalidToken:
        raise CredentialDecryptError(
            "stored credential does not decrypt with ACCEPTANCE_CREDENTIALS_KEY"
        ) from None
