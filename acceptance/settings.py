"""Settings, every one from the environment (django-environ), with an embedded default.

With no environment at all the service runs on SQLite under ``var/`` and executes Celery tasks
in-process. ``DATABASE_URL`` selects PostgreSQL (``postgres://user@host:5432/name``),
``CELERY_BROKER_URL`` a real broker (``redis://127.0.0.1:6379/0``). A malformed value fails at
start-up with the variable's name.
"""

from pathlib import Path

import environ

BASE_DIR = Path(__file__).resolve().parent.parent
env = environ.Env()

# Where the service keeps its own files: SQLite database, reports, lab servers, dev signing keys.
VAR_DIR = Path(env.str("ACCEPTANCE_VAR_DIR", default=str(BASE_DIR / "var"))).resolve()
VAR_DIR.mkdir(parents=True, exist_ok=True)


def _dev_secret(name: str) -> str:
    """A per-installation secret kept in VAR_DIR, made on first use (development only)."""
    from django.core.management.utils import get_random_secret_key

    path = VAR_DIR / name
    if not path.exists():
        path.write_text(get_random_secret_key())
        path.chmod(0o600)
    return path.read_text().strip()


DEBUG = env.bool("DJANGO_DEBUG", default=False)
SECRET_KEY = env.str("DJANGO_SECRET_KEY", default="") or _dev_secret("django-secret-key")
ALLOWED_HOSTS = env.list("DJANGO_ALLOWED_HOSTS", default=["127.0.0.1", "localhost"])

# Key for credentials stored at rest (SSH private keys, passphrases): a Fernet key
# (32 url-safe base64 bytes). Production sets it; development makes one under VAR_DIR.
CREDENTIALS_KEY = env.str("ACCEPTANCE_CREDENTIALS_KEY", default="")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "django_htmx",
    "acceptance",
    "gates",
    "runners",
    "runners.soak",
    "reports",
    "notifications",
]

MIDDLEWARE = [
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
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

LANGUAGE_CODE = "en"
LANGUAGES = [("en", "English"), ("zh-hans", "简体中文")]
LOCALE_PATHS = [BASE_DIR / "locale"]
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True
STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "static"
STATIC_ROOT.mkdir(exist_ok=True)
# WhiteNoise serves the project's own static files (no CDN); without collectstatic (tests,
# development) it finds them in the apps directly.
WHITENOISE_USE_FINDERS = True

# Celery: the embedded default runs tasks in-process; a broker URL makes them real.
CELERY_TASK_ALWAYS_EAGER = not env.str("CELERY_BROKER_URL", default="")
# In-process mode never touches a broker; "memory://localhost/" keeps kombu from guessing one.
CELERY_BROKER_URL = env.str("CELERY_BROKER_URL", default="") or "memory://localhost/"
CELERY_TASK_EAGER_PROPAGATES = False
CELERY_RESULT_BACKEND = env.str("CELERY_RESULT_BACKEND", default="") or None
CELERY_TASK_IGNORE_RESULT = True
# The task modules (doors onto the services), found by name: runners.doorbell rings them.
CELERY_IMPORTS = ("runners.tasks", "runners.soak.tasks", "notifications.tasks")
CELERY_TASK_ACKS_LATE = False  # a probe run on a customer node is never re-delivered silently
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True

# Reports and signing. Production gives a PKCS#12 file and its passphrase; without one a
# development signing certificate is made under VAR_DIR/signing on first use.
REPORTS_DIR = Path(env.str("ACCEPTANCE_REPORTS_DIR", default=str(VAR_DIR / "reports")))
REPORT_SIGNING_PKCS12 = env.str("REPORT_SIGNING_PKCS12", default="")
REPORT_SIGNING_PASSPHRASE = env.str("REPORT_SIGNING_PASSPHRASE", default="")
REPORT_TRUST_ROOTS = env.list("REPORT_TRUST_ROOTS", default=[])
SIGNING_DIR = VAR_DIR / "signing"
# RFC 3161 timestamp authority for report signatures (empty: no timestamp token).
SIGNING_TSA_URL = env.str("SIGNING_TSA_URL", default="")
SIGNING_TSA_TIMEOUT_S = env.float("SIGNING_TSA_TIMEOUT_S", default=10.0)
# PEM files of the roots the TSA's tokens chain to (trusted for timestamps only).
SIGNING_TSA_TRUST_ROOTS = env.list("SIGNING_TSA_TRUST_ROOTS", default=[])

# Lab nodes (local OpenSSH servers with stand-in tools) live here.
LAB_DIR = VAR_DIR / "lab"

# A node job whose worker sent no heartbeat for this long is lost (worker killed): recovery
# fails it with the reason and kills what it left on the node (seconds).
RUNS_LOST_AFTER_SECONDS = env.float("RUNS_LOST_AFTER_SECONDS", default=90.0)

# SSH defaults for probe runs (seconds).
SSH_CONNECT_TIMEOUT = env.float("SSH_CONNECT_TIMEOUT", default=10.0)
# Connection set-up refused or timed out is tried again this many times (back-off 1 s, 2 s, 4 s).
SSH_CONNECT_RETRIES = env.int("SSH_CONNECT_RETRIES", default=3)

# --- G4 soak allow-list (issue 13 item 4): the only commands a soak plan may run ----------
# Operations, not the plan, decide which vendor drive commands and vLLM executables run on a
# customer node. SOAK_VENDOR_COMMANDS is JSON, from the environment or the JSON file named by
# SOAK_VENDOR_COMMANDS_FILE: {"KEY": {"inject": [argv], "heal": [argv], "status": [argv],
# "params": {"drive": "int 0..23"}}}; "{drive}" (a whole argv element) is the fault's target
# drive, other "{name}" elements come from the fault's "args". runners.soak.plan checks every
# entry on use (absolute path or bare name; shells and interpreters refused).
import json as _json  # noqa: E402 (this block only)

_soak_file = env.str("SOAK_VENDOR_COMMANDS_FILE", default="")
SOAK_VENDOR_COMMANDS = (_json.loads(Path(_soak_file).read_text()) if _soak_file
                        else env.json("SOAK_VENDOR_COMMANDS", default={}))
SOAK_VLLM_EXECUTABLES = env.list("SOAK_VLLM_EXECUTABLES", default=["vllm"])
# The lab's stand-ins (runners/lab/standins), allowed for lab engagements only.
SOAK_LAB_VENDOR_COMMANDS = {
    "lab-array-drive": {"inject": ["soak-array", "drive", "out", "{drive}"],
                        "heal": ["soak-array", "drive", "in", "{drive}"],
                        "status": ["soak-array", "drive", "status"],
                        "params": {"drive": "int 0..23"}},
}
SOAK_LAB_VLLM_EXECUTABLES = ["soak-vllm"]
# --- end of the G4 soak allow-list -------------------------------------------------------

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

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "loggers": {
        "paramiko": {"level": "WARNING"},
        "pyhanko": {"level": "ERROR"},
        "pyhanko_certvalidator": {"level": "ERROR"},
    },
    "root": {"handlers": ["console"], "level": env.str("LOG_LEVEL", default="WARNING")},
}

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
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.LimitOffsetPagination",
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
