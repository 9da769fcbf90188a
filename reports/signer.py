"""The service's signing identity, loaded once per process.

Decrypting the PKCS#12 file costs about 0.7 s of CPU, which every issued report paid
(``reports.signing.load_signer``); ``service_signer`` keeps the loaded signer while the
settings and the file stay as they were (path, passphrase, inode, size, mtime), so a replaced
key or passphrase is read again on the next report.
"""

from __future__ import annotations

import hashlib
import os

from reports.signing import SigningSetupError, load_signer, signer_source

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
        _LOADED.clear()
        _LOADED[key] = signer
    return signer
