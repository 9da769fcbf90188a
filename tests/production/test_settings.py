"""Settings for real sites: a production start without its secrets is refused with the variable
named; the documented production environment passes ``check --deploy`` without a warning; the
older variable names still work."""

from pathlib import Path

import pytest

from tests.production.helpers import base_env, manage, production_env


@pytest.fixture
def prod(tmp_path):
    return production_env(tmp_path / "var", tmp_path / "signer.p12", "pass")


def test_the_documented_production_environment_passes_check_deploy(prod):
    checked = manage(prod, "check", "--deploy", "--fail-level", "WARNING")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "System check identified no issues (0 silenced)." in checked.stdout
    assert checked.stderr == ""


@pytest.mark.parametrize("variable", ["ACCEPTANCE_SECRET_KEY", "ACCEPTANCE_CREDENTIALS_KEY",
                                      "ACCEPTANCE_REPORT_SIGNING_PKCS12"])
def test_it_refuses_a_production_start_without_a_secret_naming_it(prod, variable):
    del prod[variable]
    refused = manage(prod, "check")
    assert refused.returncode == 2
    assert refused.stderr == (f"refusing to start: {variable} is not set "
                              "(ACCEPTANCE_ENV=production needs it)\n")
    assert not (Path(prod["ACCEPTANCE_VAR_DIR"]) / "django-secret-key").exists()  # no fallback


def test_it_refuses_an_unknown_environment_and_a_malformed_proxy_header(tmp_path, prod):
    wrong = manage(base_env(tmp_path / "var", ACCEPTANCE_ENV="prod"), "check")
    assert (wrong.returncode, wrong.stderr) == (
        2, "refusing to start: ACCEPTANCE_ENV must be 'development' or 'production', "
           "not 'prod'\n")
    prod["ACCEPTANCE_SECURE_PROXY_SSL_HEADER"] = "X-Forwarded-Proto"
    bad = manage(prod, "check")
    assert (bad.returncode, bad.stderr) == (
        2, "refusing to start: ACCEPTANCE_SECURE_PROXY_SSL_HEADER must look like "
           "'X-Forwarded-Proto: https'\n")


def test_production_turns_the_https_settings_on_and_the_prefix_wins_over_old_names(prod):
    prod["DJANGO_ALLOWED_HOSTS"] = "old.example.com"
    shown = manage(prod, "shell", "--no-imports", "-c", (
        "from django.conf import settings as s; print(s.SECURE_PROXY_SSL_HEADER, "
        "s.SECURE_SSL_REDIRECT, s.SESSION_COOKIE_SECURE, s.CSRF_COOKIE_SECURE, "
        "s.SECURE_HSTS_SECONDS, s.SECURE_HSTS_INCLUDE_SUBDOMAINS, s.SECURE_HSTS_PRELOAD, "
        "s.ALLOWED_HOSTS, s.CSRF_TRUSTED_ORIGINS, s.DEBUG, "
        "s.STORAGES['staticfiles']['BACKEND'])"))
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.strip() == (
        "('HTTP_X_FORWARDED_PROTO', 'https') True True True 31536000 True True "
        "['acceptance.example.com', '127.0.0.1'] ['https://acceptance.example.com'] False "
        "whitenoise.storage.CompressedManifestStaticFilesStorage")


def test_the_embedded_default_keeps_its_development_fallbacks_and_old_names(tmp_path):
    env = base_env(tmp_path / "var", DJANGO_SECRET_KEY="legacy-secret",
                   DJANGO_ALLOWED_HOSTS="legacy.example.com", RUNS_LOST_AFTER_SECONDS="7")
    shown = manage(env, "shell", "--no-imports", "-c", (
        "from django.conf import settings as s; print(s.SECRET_KEY, s.ALLOWED_HOSTS, "
        "s.RUNS_LOST_AFTER_SECONDS, s.SECURE_SSL_REDIRECT, s.SECURE_HSTS_SECONDS, "
        "s.CELERY_TASK_ALWAYS_EAGER, s.LOG_FORMAT)"))
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.strip() == "legacy-secret ['legacy.example.com'] 7.0 False 0 True text"
