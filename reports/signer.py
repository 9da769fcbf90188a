"""The service's signing identity, loaded once per process.

Decrypting the PKCS#12 file costs about 0.7 s of CPU, which every issued report paid
(``reports.signing.load_signer``); ``service_signer`` keeps the loaded signer while the
settings and the file stay as they were (path, passphrase, inode, size, mtime), so a replaced
key or passphrase is read again on the next report. pyHanko's ``SimpleSigner.sign_raw`` also
loads the private key again for every signature (and signs twice per PDF, once to size the
signature), each load re-checking the RSA key (about 0.3 s each here): the kept signer loads it
once, checked, and signs RSA PKCS#1 v1.5 with it (other mechanisms as pyHanko does).
"""

from __future__ import annotations

import hashlib
import os

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.padding import PKCS1v15
from pyhanko.sign.signers import SimpleSigner
from pyhanko_certvalidator.util import get_pyca_cryptography_hash

from reports.signing import SigningSetupError, load_signer, signer_source


class KeptKeySigner(SimpleSigner):
    """A ``SimpleSigner`` that loads its private key once (see the module)."""

    _kept_key = None

    def sign_raw(self, data: bytes, digest_algorithm: str) -> bytes:
        mechanism = self.get_signature_mechanism_for_digest(digest_algorithm)
        if mechanism.signature_algo != "rsassa_pkcs1v15":
            return super().sign_raw(data, digest_algorithm)
        if self._kept_key is None:
            self._kept_key = serialization.load_der_private_key(self.signing_key.dump(),
                                                                password=None)
        return self._kept_key.sign(data, PKCS1v15(), get_pyca_cryptography_hash(digest_algorithm))

#: The service's signer once loaded, by what it was loaded from (one entry).
_LOADED: dict[tuple, object] = {}


def service_signer():
    """``load_signer()`` of the settings, loaded again only when they or the file change.
    Raises SigningSetupError as ``load_signer`` does."""
    path, passphrase = signer_source(None, None, None)
    try:
        st = os.stat(path)
    except OSError as e:
        raise SigningSetupError(f"cannot read signing key {path}: {e.strerror}") from e
    key = (str(path), hashlib.sha256(passphrase or b"").hexdigest(), st.st_ino, st.st_size,
           st.st_mtime_ns)
    signer = _LOADED.get(key)
    if signer is None:
        signer = load_signer(pkcs12_path=path, passphrase=passphrase)
        signer.__class__ = KeptKeySigner  # the same object; its key now loaded once
        _LOADED.clear()
        _LOADED[key] = signer
    return signer
