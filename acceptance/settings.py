"""Settings, every one from the environment (django-environ), with an embedded default.

With no environment at all the service runs on SQLite under ``var/`` and executes Celery tasks
in-process. ``DATABASE_URL`` selects PostgreSQL (``postgres://user@host:5432/name``),
``CELERY_BROKER_URL`` a real broker (``redis://127.0.0.1:6379/0``; ``filesystem://`` is the
server-less broker ``manage.py serve`` uses on the embedded default). A malformed value fails at
start-up with the variable's name.

The service's own variables share one prefix, ``ACCEPTANCE_`` (``ACCEPTANCE_SECRET_KEY``,
``ACCEPTANCE_ALLOWED_HOSTS`` …); the older unprefixed names (``DJANGO_SECRET_KEY``,
``REPORT_SIGNING_PKCS12``, ``RUNS_LOST_AFTER_SECONDS`` …) are still read when the prefixed one is
unset. Libraries' own conventions keep their names: ``DATABASE_URL``, ``CELERY_BROKER_URL``,
``CELERY_RESULT_BACKEND``, ``SENTRY_DSN``.

``ACCEPTANCE_ENV=production`` is the production switch: the HTTPS settings default to on, and a
start without a secret key, credentials key or signing identity is refused with the variable
named (no development fallback outside the embedded default).
"""

import os
import sys
from pathlib import Path

import environ
from cryptography.fernet import Fernet

from acceptance.files import private_dir, private_secret, private_sqlite_file

BASE_DIR = Path(__file__).resolve().parent.parent


def _refuse(message: str) -> None:
    """Stop the start with one line on stderr (manage.py, gunicorn and celery alike)."""
    sys.stderr.write(f"refusing to start: {message}\n")
    raise SystemExit(2)


BOOLEAN_FALSE_STRINGS = ("false", "off", "no", "n", "0", "")
CAST_NAMES = {bool: "true or false", int: "a whole number", float: "a number"}


class StrictEnv(environ.Env):
    """django-environ, but a malformed number or switch refuses the start naming the variable
    (not a traceback), and a switch that is neither true nor false (``maybe``) is not read as
    off: ``ACCEPTANCE_SECURE_COOKIES=maybe`` must not turn secure cookies off unnoticed."""

    def get_value(self, var, cast=None, default=environ.Env.NOTSET, parse_default=False):
        raw = self.ENVIRON.get(var)
        if cast in CAST_NAMES and isinstance(raw, str):
            text = raw.strip().lower()
            bad = (cast is bool and text not in (*self.BOOLEAN_TRUE_STRINGS,
                                                 *BOOLEAN_FALSE_STRINGS))
            if not bad and cast is not bool:
                try:
                    cast(text)
                except ValueError:
                    bad = True
            if bad:
                _refuse(f"{var} must be {CAST_NAMES[cast]}, not {raw!r}")
        return super().get_value(var, cast=cast, default=default, parse_default=parse_default)


env = StrictEnv()


def own(cast: str, name: str, *, legacy: tuple[str, ...] = (), default=None):
    """``ACCEPTANCE_<name>`` read with django-environ's ``cast`` (str, bool, int, float, list,
    json); the older names in ``legacy`` when it is unset; else ``default``."""
    for variable in (f"ACCEPTANCE_{name}", *legacy):
        if variable in os.environ:
            return getattr(env, cast)(variable)
    return default


ENVIRONMENT = own("str", "ENV", default="development")
if ENVIRONMENT not in ("development", "production"):
    _refuse(f"ACCEPTANCE_ENV must be 'development' or 'production', not {ENVIRONMENT!r}")
PRODUCTION = ENVIRONMENT == "production"


def _required(name: str, value: str) -> str:
    if PRODUCTION and not value:
        _refuse(f"ACCEPTANCE_{name} is not set (ACCEPTANCE_ENV=production needs it)")
    return value

# Where the service keeps its own files: SQLite database, reports, lab servers, dev signing keys.
VAR_DIR = Path(own("str", "VAR_DIR", default=str(BASE_DIR / "var"))).resolve()
private_dir(VAR_DIR)  # 0700: database, secrets and keys are for the service alone


def _dev_secret(name: str) -> str:
    """A per-installation secret kept in VAR_DIR, made on first use (development only)."""
    from django.core.management.utils import get_random_secret_key

    return private_secret(VAR_DIR / name, get_random_secret_key)


DEBUG = own("bool", "DEBUG", legacy=("DJANGO_DEBUG",), default=False)
SECRET_KEY = (_required("SECRET_KEY", own("str", "SECRET_KEY", legacy=("DJANGO_SECRET_KEY",),
                                          default=""))
              or _dev_secret("django-secret-key"))
ALLOWED_HOSTS = own("list", "ALLOWED_HOSTS", legacy=("DJANGO_ALLOWED_HOSTS",),
                    default=["127.0.0.1", "localhost"])

# Key for credentials stored at rest (SSH private keys, passphrases): a Fernet key
# (32 url-safe base64 bytes). Production sets it; development makes one under VAR_DIR.
CREDENTIALS_KEY = _required("CREDENTIALS_KEY", own("str", "CREDENTIALS_KEY", default=""))
try:
    if CREDENTIALS_KEY:
        Fernet(CREDENTIALS_KEY)  # refused now, not at the first node registered (a 500)
except ValueError:
    _refuse("ACCEPTANCE_CREDENTIALS_KEY is not a Fernet key (32 url-safe base64-encoded bytes: "
            "python -c 'from cryptography.fernet import Fernet; "
            "print(Fernet.generate_key().decode())')")

# --- HTTPS behind a reverse proxy (on by default in production) ---------------------------
# ACCEPTANCE_SECURE_PROXY_SSL_HEADER names the header the proxy sets on HTTPS requests and its
# value, e.g. "X-Forwarded-Proto: https"; only set it behind a proxy that overwrites the header.
_proxy_header = own("str", "SECURE_PROXY_SSL_HEADER", default="")
if _proxy_header:
    _header, _colon, _value = _proxy_header.partition(":")
    if not _colon or not _header.strip() or not _value.strip():
        _refuse("ACCEPTANCE_SECURE_PROXY_SSL_HEADER must look like 'X-Forwarded-Proto: https'")
    SECURE_PROXY_SSL_HEADER = ("HTTP_" + _header.strip().upper().replace("-", "_"),
                               _value.strip())
CSRF_TRUSTED_ORIGINS = own("list", "CSRF_TRUSTED_ORIGINS", default=[])
SECURE_SSL_REDIRECT = own("bool", "SSL_REDIRECT", default=PRODUCTION)
# Health checks come from the orchestrator over plain HTTP, inside the deployment.
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$"]
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = own("bool", "SECURE_COOKIES", default=PRODUCTION)
SECURE_HSTS_SECONDS = own("int", "HSTS_SECONDS", default=31_536_000 if PRODUCTION else 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = own("bool", "HSTS_INCLUDE_SUBDOMAINS", default=PRODUCTION)
SECURE_HSTS_PRELOAD = own("bool", "HSTS_PRELOAD", default=PRODUCTION)
# --- end of HTTPS behind a reverse proxy --------------------------------------------------

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "django_htmx",
    "acceptance",
    "gates",
    "runners",
    "runners.soak",
    "reports",
    "notifications",
    "business",
]

MIDDLEWARE = [
    "acceptance.health.HealthMiddleware",  # /healthz, /readyz for any Host (container checks)
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.locale.LocaleMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "acceptance.urls"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "django.template.context_processors.i18n",
                "acceptance.permissions.roles_context",
            ]
        },
    }
]
WSGI_APPLICATION = "acceptance.wsgi.application"

DATABASES = {
    "default": env.db("DATABASE_URL", default=f"sqlite:///{VAR_DIR / 'acceptance.sqlite3'}")
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Worker and command share the file: wait for a writer instead of failing at once.
    DATABASES["default"].setdefault("OPTIONS", {})["timeout"] = 30
    if DATABASES["default"]["NAME"] not in ("", ":memory:"):
        private_sqlite_file(Path(DATABASES["default"]["NAME"]))
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

LANGUAGE_CODE = "en"
LANGUAGES = [("en", "English"), ("zh-hans", "简体中文")]
LOCALE_PATHS = [BASE_DIR / "locale"]
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True
STATIC_URL = "static/"
STATIC_ROOT = Path(own("str", "STATIC_ROOT", default=str(VAR_DIR / "static")))
STATIC_ROOT.mkdir(parents=True, exist_ok=True)
# WhiteNoise serves the project's own static files (no CDN); without collectstatic (tests,
# development) it finds them in the apps directly. Production serves what `collectstatic` wrote,
# under hashed names (cached for ever), compressed.
WHITENOISE_USE_FINDERS = not PRODUCTION
if PRODUCTION:
    STORAGES = {
        "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
        "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
    }

# Celery: the embedded default runs tasks in-process; a broker URL makes them real.
CELERY_TASK_ALWAYS_EAGER = not env.str("CELERY_BROKER_URL", default="")
# In-process mode never touches a broker; "memory://localhost/" keeps kombu from guessing one.
CELERY_BROKER_URL = env.str("CELERY_BROKER_URL", default="") or "memory://localhost/"
if CELERY_BROKER_URL.startswith("filesystem://"):
    # The server-less broker of `manage.py serve` on the embedded default (acceptance.serving):
    # one file per message under VAR_DIR/broker. A consumer takes a message by renaming it into
    # "processed" (atomic on one file system, so two workers never both take it).
    BROKER_DIR = VAR_DIR / "broker"
    for _sub in ("queue", "processed", "control"):
        (BROKER_DIR / _sub).mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(BROKER_DIR / "queue"),
        "data_folder_out": str(BROKER_DIR / "queue"),
        "processed_folder": str(BROKER_DIR / "processed"),
        "store_processed": True,
        "control_folder": str(BROKER_DIR / "control"),
    }
CELERY_TASK_EAGER_PROPAGATES = False
CELERY_RESULT_BACKEND = env.str("CELERY_RESULT_BACKEND", default="") or None
CELERY_TASK_IGNORE_RESULT = True
# The task modules (doors onto the services), found by name: runners.doorbell rings them.
CELERY_IMPORTS = ("runners.tasks", "runners.soak.tasks", "notifications.tasks")
CELERY_TASK_ACKS_LATE = False  # a probe run on a customer node is never re-delivered silently
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# How many node jobs the workers run at once (workers × --concurrency; `serve` sets it for its
# children from its own options). A plan step every node starts at the same time (G3's shared
# read-back) refuses to start with more nodes than this (runners.barrier).
NODE_JOB_SLOTS = env.int("ACCEPTANCE_NODE_JOB_SLOTS", default=128)
# How long the first node at such a step waits for the last one (s).
BARRIER_WAIT_S = env.float("ACCEPTANCE_BARRIER_WAIT_S", default=1800.0)
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# A worker thread keeps its database connection between tasks (acceptance.celery): for this
# long (s; checked with a SELECT 1 before each task's first query), in at most this many
# threads per worker process. PostgreSQL's max_connections (100 by default) is shared: 2
# workers × 32 kept idle leave room for the web server, beat and commands; a running node job
# holds its thread's connection anyway. Celery's Django fix-up would close the connection
# after every task (or, with CELERY_DB_REUSE_MAX, in whichever thread counts up to it): kept
# out of the way, the signals in acceptance.celery do it per thread.
WORKER_DB_CONN_MAX_AGE = own("float", "WORKER_DB_CONN_MAX_AGE", default=300.0)
WORKER_DB_CONNECTIONS_KEPT = own("int", "WORKER_DB_CONNECTIONS_KEPT", default=32)
if WORKER_DB_CONN_MAX_AGE < 0 or WORKER_DB_CONNECTIONS_KEPT < 0:
    _refuse("ACCEPTANCE_WORKER_DB_CONN_MAX_AGE and _CONNECTIONS_KEPT must be 0 or more")
CELERY_DB_REUSE_MAX = 1 << 62
# Sending a task to a broker that does not answer fails within about a second (then the start
# is refused with the reason, runners.doorbell.BrokerUnavailable), instead of kombu's defaults.
CELERY_TASK_PUBLISH_RETRY_POLICY = {"max_retries": 2, "interval_start": 0,
                                    "interval_step": 0.2, "interval_max": 0.5}
CELERY_BROKER_CONNECTION_TIMEOUT = 4.0
if CELERY_BROKER_URL.startswith(("redis://", "rediss://")):
    CELERY_BROKER_TRANSPORT_OPTIONS = {"socket_connect_timeout": 4, "socket_timeout": 30}

# Reports and signing. Production gives a PKCS#12 file and its passphrase; without one a
# development signing certificate is made under VAR_DIR/signing on first use.
REPORTS_DIR = Path(own("str", "REPORTS_DIR", default=str(VAR_DIR / "reports")))
REPORT_SIGNING_PKCS12 = _required("REPORT_SIGNING_PKCS12", own(
    "str", "REPORT_SIGNING_PKCS12", legacy=("REPORT_SIGNING_PKCS12",), default=""))
REPORT_SIGNING_PASSPHRASE = own("str", "REPORT_SIGNING_PASSPHRASE",
                                legacy=("REPORT_SIGNING_PASSPHRASE",), default="")
# A passphrase may come from a file instead (a compose/Kubernetes secret).
_passphrase_file = own("str", "REPORT_SIGNING_PASSPHRASE_FILE", default="")
if _passphrase_file:
    try:
        REPORT_SIGNING_PASSPHRASE = Path(_passphrase_file).read_text().strip()
    except OSError as _error:
        _refuse(f"ACCEPTANCE_REPORT_SIGNING_PASSPHRASE_FILE: cannot read {_passphrase_file}: "
                f"{_error.strerror}")
REPORT_TRUST_ROOTS = own("list", "REPORT_TRUST_ROOTS", legacy=("REPORT_TRUST_ROOTS",),
                         default=[])
SIGNING_DIR = VAR_DIR / "signing"
# RFC 3161 timestamp authority for report signatures (empty: no timestamp token).
SIGNING_TSA_URL = own("str", "SIGNING_TSA_URL", legacy=("SIGNING_TSA_URL",), default="")
SIGNING_TSA_TIMEOUT_S = own("float", "SIGNING_TSA_TIMEOUT_S", legacy=("SIGNING_TSA_TIMEOUT_S",),
                            default=10.0)
# PEM files of the roots the TSA's tokens chain to (trusted for timestamps only).
SIGNING_TSA_TRUST_ROOTS = own("list", "SIGNING_TSA_TRUST_ROOTS",
                              legacy=("SIGNING_TSA_TRUST_ROOTS",), default=[])

# Raw outputs of probe runs: content-addressed files (runners.outputs), streamed as they arrive.
OUTPUTS_DIR = Path(own("str", "OUTPUTS_DIR", default=str(VAR_DIR / "outputs")))
# Each stream of a probe run is stored up to this many bytes, exactly; more fails the run as
# output_cap with the first OUTPUT_CAP_BYTES kept and hashed (the remote command is killed).
OUTPUT_CAP_BYTES = own("int", "OUTPUT_CAP_BYTES", default=256 << 20)
if not 1 <= OUTPUT_CAP_BYTES <= 1 << 40:
    _refuse(f"ACCEPTANCE_OUTPUT_CAP_BYTES must be 1 … {1 << 40} bytes, not {OUTPUT_CAP_BYTES}")
# A parser reads a stored output whole; a larger one fails as parse (kept, never read whole).
PARSE_MAX_BYTES = own("int", "PARSE_MAX_BYTES", default=32 << 20)
if PARSE_MAX_BYTES < 1:
    _refuse(f"ACCEPTANCE_PARSE_MAX_BYTES must be a positive number, not {PARSE_MAX_BYTES}")

# Lab nodes (local OpenSSH servers with stand-in tools) live here.
LAB_DIR = VAR_DIR / "lab"

# A node job whose worker sent no heartbeat for this long is lost (worker killed): recovery
# fails it with the reason and kills what it left on the node (seconds).
RUNS_LOST_AFTER_SECONDS = own("float", "RUNS_LOST_AFTER_SECONDS",
                              legacy=("RUNS_LOST_AFTER_SECONDS",), default=90.0)
# A node job sent to the broker and claimed by no worker for this long is sent again (it never
# started on the node), at most RUNS_RESEND_MAX times; after that — with nothing left waiting in
# the broker's queue — it is failed with the reason. The same bound counts for an evaluation
# sent with no decision recorded (runners.control; the sweep runs every RECOVER_EVERY_SECONDS).
RUNS_UNCLAIMED_AFTER_SECONDS = own("float", "RUNS_UNCLAIMED_AFTER_SECONDS", default=120.0)
RUNS_RESEND_MAX = own("int", "RUNS_RESEND_MAX", default=3)
# A worker whose database connection dropped reconnects and writes again for this long.
RUNS_DB_RETRY_SECONDS = own("float", "RUNS_DB_RETRY_SECONDS", default=30.0)

# SSH defaults for probe runs (seconds).
SSH_CONNECT_TIMEOUT = own("float", "SSH_CONNECT_TIMEOUT", legacy=("SSH_CONNECT_TIMEOUT",),
                          default=10.0)
# Connection set-up refused or timed out is tried again this many times (back-off 1 s, 2 s, 4 s).
SSH_CONNECT_RETRIES = own("int", "SSH_CONNECT_RETRIES", legacy=("SSH_CONNECT_RETRIES",),
                          default=3)
# Keepalive: after SSH_KEEPALIVE_SECONDS without a byte from the node, the session is asked to
# answer (and paramiko sends keepalives at that interval); SSH_KEEPALIVE_COUNT unanswered asks
# in a row mark it dead (unreachable): a hung session is noticed within 10 s + 3 × 10 s.
SSH_KEEPALIVE_SECONDS = own("float", "SSH_KEEPALIVE_SECONDS", default=10.0)
SSH_KEEPALIVE_COUNT = own("int", "SSH_KEEPALIVE_COUNT", default=3)
# Open connections kept between a node's jobs (runners.transport.pool): closed after this many
# seconds unused or this old, at most SSH_POOL_SIZE kept idle per worker process; 0 turns the
# pool off (every job opens and closes its own connection).
SSH_POOL_IDLE_SECONDS = own("float", "SSH_POOL_IDLE_SECONDS", default=60.0)
SSH_POOL_MAX_AGE_SECONDS = own("float", "SSH_POOL_MAX_AGE_SECONDS", default=600.0)
SSH_POOL_SIZE = own("int", "SSH_POOL_SIZE", default=256)
if SSH_POOL_IDLE_SECONDS < 0 or SSH_POOL_MAX_AGE_SECONDS < 0 or SSH_POOL_SIZE < 0:
    _refuse("ACCEPTANCE_SSH_POOL_IDLE_SECONDS, _MAX_AGE_SECONDS and _SIZE must be 0 or more")

# --- G4 soak allow-list (issue 13 item 4): the only commands a soak plan may run ----------
# Operations, not the plan, decide which vendor drive commands and vLLM executables run on a
# customer node. SOAK_VENDOR_COMMANDS is JSON, from the environment or the JSON file named by
# SOAK_VENDOR_COMMANDS_FILE: {"KEY": {"inject": [argv], "heal": [argv], "status": [argv],
# "params": {"drive": "int 0..23"}}}; "{drive}" (a whole argv element) is the fault's target
# drive, other "{name}" elements come from the fault's "args". runners.soak.plan checks every
# entry on use (absolute path or bare name; shells and interpreters refused).
import json as _json  # noqa: E402 (this block only)

_soak_file = own("str", "SOAK_VENDOR_COMMANDS_FILE", legacy=("SOAK_VENDOR_COMMANDS_FILE",),
                 default="")
SOAK_VENDOR_COMMANDS = (_json.loads(Path(_soak_file).read_text()) if _soak_file
                        else own("json", "SOAK_VENDOR_COMMANDS", legacy=("SOAK_VENDOR_COMMANDS",),
                                 default={}))
SOAK_VLLM_EXECUTABLES = own("list", "SOAK_VLLM_EXECUTABLES", legacy=("SOAK_VLLM_EXECUTABLES",),
                            default=["vllm"])
# The lab's stand-ins (runners/lab/standins), allowed for lab engagements only.
SOAK_LAB_VENDOR_COMMANDS = {
    "lab-array-drive": {"inject": ["soak-array", "drive", "out", "{drive}"],
                        "heal": ["soak-array", "drive", "in", "{drive}"],
                        "status": ["soak-array", "drive", "status"],
                        "params": {"drive": "int 0..23"}},
}
SOAK_LAB_VLLM_EXECUTABLES = ["soak-vllm"]
# --- end of the G4 soak allow-list -------------------------------------------------------

# Logs: ACCEPTANCE_LOG_FORMAT=json (the default in production and under `manage.py serve`)
# writes one JSON object per line with time, level, logger, message and the engagement, gate
# run, node and probe ids where known (acceptance.logging).
LOG_FORMAT = own("str", "LOG_FORMAT", default="json" if PRODUCTION else "text")
if LOG_FORMAT not in ("json", "text"):
    _refuse(f"ACCEPTANCE_LOG_FORMAT must be 'json' or 'text', not {LOG_FORMAT!r}")
CELERY_LOG_JSON = LOG_FORMAT == "json"  # acceptance.celery gives Celery's handlers the same
# --- notifications (issue 20 items 4-5): e-mail, webhooks, calendar feeds -------------------
# E-mail goes through Django's mail API (EMAIL_* settings). Links in notices and calendar feeds
# start with ACCEPTANCE_BASE_URL. A webhook attempt times out after NOTIFY_WEBHOOK_TIMEOUT_S;
# a failed delivery is tried NOTIFY_MAX_ATTEMPTS times in all, NOTIFY_RETRY_BASE_S × 2^n apart.
NOTIFICATIONS_BASE_URL = env.str("ACCEPTANCE_BASE_URL", default="http://127.0.0.1:8000")
NOTIFY_WEBHOOK_TIMEOUT_S = env.float("NOTIFY_WEBHOOK_TIMEOUT_S", default=5.0)
NOTIFY_MAX_ATTEMPTS = env.int("NOTIFY_MAX_ATTEMPTS", default=5)
NOTIFY_RETRY_BASE_S = env.float("NOTIFY_RETRY_BASE_S", default=30.0)
# A run whose node jobs no worker picked up for this long is "queued too long" (seconds).
NOTIFY_QUEUED_TOO_LONG_SECONDS = env.float("NOTIFY_QUEUED_TOO_LONG_SECONDS", default=900.0)
# Celery beat (`celery -A acceptance beat`) runs the sweep: due soon, overdue, queued too long.
CELERY_BEAT_SCHEDULE = {
    "notifications-schedule-sweep": {"task": "notifications.schedule_sweep",
                                     "schedule": env.float("NOTIFY_SWEEP_SECONDS",
                                                           default=600.0)},
    # Raw-output retention (off unless ACCEPTANCE_RAW_OUTPUT_RETENTION_DAYS is set): daily.
    "runners-raw-outputs-prune": {"task": "runners.raw_outputs_prune", "schedule": 86400.0},
}
# --- end of notifications --------------------------------------------------------------------
# --- operations (issue 14 items 4, 8): metrics and raw-output retention ------------------
# /metrics answers a scrape with "Authorization: Bearer <this>" (empty: staff sessions only).
ACCEPTANCE_METRICS_TOKEN = env.str("ACCEPTANCE_METRICS_TOKEN", default="")
# Raw outputs of an accepted engagement whose signed report embeds them may be pruned after
# this many days (runners.retention); unset: never pruned.
ACCEPTANCE_RAW_OUTPUT_RETENTION_DAYS = env.int("ACCEPTANCE_RAW_OUTPUT_RETENTION_DAYS",
                                               default=None)
# --- end of operations -------------------------------------------------------------------
# Beat also settles lost node jobs and stopped soaks while every worker stays up (a worker that
# starts does it too, runners.tasks.recover_on_start).
CELERY_BEAT_SCHEDULE["runs-recover"] = {
    "task": "runners.runs_recover",
    "schedule": own("float", "RECOVER_EVERY_SECONDS", default=30.0)}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"ids": {"()": "acceptance.logging.ContextFilter"},
                "client_errors": {"()": "acceptance.logging.ClientErrorFilter"}},
    "formatters": {"json": {"()": "acceptance.logging.json_formatter"}},
    "handlers": {"console": {"class": "logging.StreamHandler",
                             "filters": ["ids", "client_errors"],
                             **({"formatter": "json"} if LOG_FORMAT == "json" else {})}},
    "loggers": {
        "paramiko": {"level": "WARNING"},
        # paramiko's transport thread logs a failed handshake (no SSH banner, a reset) as
        # ERROR lines of a traceback; runners.transport reports each such failure itself, in one
        # line naming the node, so commands and logs never show the traceback.
        "paramiko.transport": {"level": "CRITICAL"},
        "pyhanko": {"level": "ERROR"},
        "pyhanko_certvalidator": {"level": "ERROR"},
    },
    "root": {"handlers": ["console"],
             "level": own("str", "LOG_LEVEL", legacy=("LOG_LEVEL",),
                          default="INFO" if PRODUCTION else "WARNING")},
}

# Error reporting: sentry-sdk when SENTRY_DSN is set (its Django and Celery integrations turn
# on by themselves); no personal data is sent.
SENTRY_DSN = env.str("SENTRY_DSN", default="")
if SENTRY_DSN:
    import sentry_sdk  # noqa: E402 (only when SENTRY_DSN is set)

    sentry_sdk.init(dsn=SENTRY_DSN, environment=ENVIRONMENT, send_default_pii=False)
# --- E-mail, passwords and invitations (issue 20 item 2) ---------------------------------
# Invitations, membership notices and password resets go through Django's mail API: printed on
# the console in the embedded default, sent by SMTP once EMAIL_HOST is set.
EMAIL_HOST = env.str("EMAIL_HOST", default="")
EMAIL_BACKEND = env.str("EMAIL_BACKEND", default=(
    "django.core.mail.backends.smtp.EmailBackend" if EMAIL_HOST
    else "django.core.mail.backends.console.EmailBackend"))
EMAIL_PORT = env.int("EMAIL_PORT", default=25)
EMAIL_HOST_USER = env.str("EMAIL_HOST_USER", default="")
EMAIL_HOST_PASSWORD = env.str("EMAIL_HOST_PASSWORD", default="")
EMAIL_USE_TLS = env.bool("EMAIL_USE_TLS", default=False)
EMAIL_TIMEOUT = env.float("EMAIL_TIMEOUT", default=30.0)
DEFAULT_FROM_EMAIL = env.str("DEFAULT_FROM_EMAIL", default="acceptance@localhost")
# An invitation's link is good once, for this many days.
INVITATION_EXPIRY_DAYS = env.int("INVITATION_EXPIRY_DAYS", default=7)
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator",
     "OPTIONS": {"min_length": 10}},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
# --- end of e-mail, passwords and invitations --------------------------------------------

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

REST_FRAMEWORK = {
    # A broker or database that does not answer is a 503 with one line (acceptance.api.errors).
    "EXCEPTION_HANDLER": "acceptance.api.errors.exception_handler",
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "acceptance.api.authentication.ApiTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_PAGINATION_CLASS": "acceptance.api.pagination.LedgerLimitOffsetPagination",
    "PAGE_SIZE": 100,
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Acceptance service API",
    "DESCRIPTION": "Engagements, gates, criteria, runs, measurements, decisions and reports of "
                   "the gated joint acceptance test (token authentication).",
    "VERSION": "1",
    # A node's role and a person's role are both "role" in the API (acceptance/api/setup.py).
    "ENUM_NAME_OVERRIDES": {"NodeRoleEnum": "acceptance.models.Node.Role",
                            "MemberRoleEnum": "acceptance.models.Membership.Role"},
}

# --- abuse limits and API tokens (issue 13 item 9, issue 14 item 6) ----------------------
# Login throttling (django-axes): AXES_FAILURE_LIMIT wrong passwords for one user name from one
# address lock that pair out for AXES_COOLOFF_MINUTES; the lockout page is in the layout.
from datetime import timedelta as _timedelta  # noqa: E402 (this block only)

INSTALLED_APPS.append("axes")
MIDDLEWARE.append("axes.middleware.AxesMiddleware")
AUTHENTICATION_BACKENDS = ["acceptance.login_limits.LoginAttemptsBackend",
                           "django.contrib.auth.backends.ModelBackend"]
AXES_ENABLED = env.bool("AXES_ENABLED", default=True)
AXES_FAILURE_LIMIT = env.int("AXES_FAILURE_LIMIT", default=5)
AXES_COOLOFF_TIME = _timedelta(minutes=env.int("AXES_COOLOFF_MINUTES", default=15))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_VERBOSE = False  # no start-up banner: a clean start prints nothing (check --deploy, serve)
# Behind a reverse proxy every login comes from the proxy's address: with
# ACCEPTANCE_TRUSTED_PROXY_COUNT=N the client's address is read from X-Forwarded-For, N proxies in.
_proxies = own("int", "TRUSTED_PROXY_COUNT", default=None)
if _proxies:
    AXES_IPWARE_PROXY_COUNT = _proxies
    AXES_IPWARE_META_PRECEDENCE_ORDER = ("HTTP_X_FORWARDED_FOR", "REMOTE_ADDR")
AXES_LOCKOUT_CALLABLE = "acceptance.account_views.login_locked_out"
# API throttles (acceptance.api.throttles): anonymous requests per address, a user's requests,
# and uploads (countersigned reports, evidence bundles, reports to verify) per user.
API_THROTTLE_RATES = {
    "anon": env.str("API_THROTTLE_ANON", default="60/min"),
    "user": env.str("API_THROTTLE_USER", default="1200/min"),
    "upload": env.str("API_THROTTLE_UPLOAD", default="60/hour"),
}
REST_FRAMEWORK["DEFAULT_THROTTLE_CLASSES"] = ["acceptance.api.throttles.AnonThrottle",
                                              "acceptance.api.throttles.UserThrottle"]
# A new API token expires after this many days (0: never); the token page may choose fewer.
API_TOKEN_EXPIRY_DAYS = env.int("API_TOKEN_EXPIRY_DAYS", default=90)
# The verify page (and a countersigned upload) refuses a larger file before reading it.
REPORT_VERIFY_MAX_BYTES = env.int("REPORT_VERIFY_MAX_BYTES", default=20 * 1024 * 1024)
# The schema documents the error answers of every operation (acceptance.api.schema).
SPECTACULAR_SETTINGS["POSTPROCESSING_HOOKS"] = [
    "drf_spectacular.hooks.postprocess_schema_enums", "acceptance.api.schema.common_errors"]
# --- end of abuse limits and API tokens --------------------------------------------------
