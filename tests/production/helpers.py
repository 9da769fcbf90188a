"""Shared by the production tests: the service's commands as subprocesses, free ports, waits."""

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

from cryptography.fernet import Fernet

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def base_env(var_dir: Path, **extra) -> dict[str, str]:
    """The environment of a fresh installation: none of the caller's service variables."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("ACCEPTANCE_", "DJANGO_", "CELERY_", "REPORT_", "SENTRY_"))
           and k not in ("DATABASE_URL", "LOG_LEVEL", "RUNS_LOST_AFTER_SECONDS")}
    env.update(ACCEPTANCE_VAR_DIR=str(var_dir), **extra)
    return env


def production_env(var_dir: Path, pkcs12: Path, passphrase: str, **extra) -> dict[str, str]:
    """The documented production environment (README, .env.example) on plain loopback."""
    return base_env(
        var_dir,
        ACCEPTANCE_ENV="production",
        ACCEPTANCE_SECRET_KEY="x" * 20 + "-a-long-random-secret-key-for-the-tests-only-7f3a9c",
        ACCEPTANCE_CREDENTIALS_KEY=Fernet.generate_key().decode(),
        ACCEPTANCE_ALLOWED_HOSTS="acceptance.example.com,127.0.0.1",
        ACCEPTANCE_CSRF_TRUSTED_ORIGINS="https://acceptance.example.com",
        ACCEPTANCE_SECURE_PROXY_SSL_HEADER="X-Forwarded-Proto: https",
        ACCEPTANCE_REPORT_SIGNING_PKCS12=str(pkcs12),
        ACCEPTANCE_REPORT_SIGNING_PASSPHRASE=passphrase,
        ACCEPTANCE_STATIC_ROOT=str(var_dir / "static"),
        **extra,
    )


def manage(env, *args, timeout=300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


def wait_for(predicate, timeout=60.0, what="condition", every=0.2):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = predicate()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
