"""An operator's typing mistakes in the environment: a malformed number or switch refuses the
start in one line naming the variable (exit status 2, no traceback), and a switch that is
neither true nor false is never read as off."""

import pytest

from tests.production.helpers import base_env, manage


@pytest.mark.parametrize("variable, value, expected", [
    ("ACCEPTANCE_HSTS_SECONDS", "abc", "a whole number"),
    ("ACCEPTANCE_SECURE_COOKIES", "maybe", "true or false"),
    ("ACCEPTANCE_SSL_REDIRECT", "yes please", "true or false"),
    ("AXES_FAILURE_LIMIT", "five", "a whole number"),
    ("NOTIFY_RETRY_BASE_S", "30s", "a number"),
])
def test_a_malformed_setting_refuses_the_start_naming_the_variable(
        tmp_path, variable, value, expected):
    refused = manage(base_env(tmp_path / "var", **{variable: value}), "check")
    assert refused.returncode == 2
    assert refused.stderr == f"refusing to start: {variable} must be {expected}, not {value!r}\n"


@pytest.mark.parametrize("value", ["Off", "0", "no", "false", ""])
def test_the_usual_spellings_of_off_still_mean_off(tmp_path, value):
    shown = manage(base_env(tmp_path / "var", ACCEPTANCE_ENV="production",
                            ACCEPTANCE_SECRET_KEY="k" * 60,
                            ACCEPTANCE_CREDENTIALS_KEY="Yk3M5qA0cVf7J8Jm2S5m1m9sVbq2b3q1c4x5y6z7a8E=",
                            ACCEPTANCE_REPORT_SIGNING_PKCS12="/dev/null",
                            ACCEPTANCE_SECURE_COOKIES=value),
                   "shell", "--no-imports", "-c", "from django.conf import settings; "
                                                  "print(settings.SESSION_COOKIE_SECURE)")
    assert (shown.returncode, shown.stdout, shown.stderr) == (0, "False\n", "")


@pytest.mark.parametrize("variable", ["ACCEPTANCE_WORKERS", "ACCEPTANCE_WEB_WORKERS",
                                      "ACCEPTANCE_WORKER_CONCURRENCY"])
def test_serve_refuses_a_malformed_count_from_the_environment_naming_it(tmp_path, variable):
    refused = manage(base_env(tmp_path / "var", **{variable: "two"}), "serve", "--print")
    assert refused.returncode == 2
    assert refused.stderr == (f"CommandError: {variable} must be a whole number of at least 1, "
                              "not 'two'\n")
    shown = manage(base_env(tmp_path / "var", **{variable: "3"}), "serve", "--print")
    assert shown.returncode == 0, shown.stderr


@pytest.mark.parametrize("environment", ["production", "development"])
def test_a_credentials_key_that_is_not_a_fernet_key_refuses_the_start(tmp_path, environment):
    """Else the service started, /readyz said ready, and the first node registered was a 500."""
    env = base_env(tmp_path / "var", ACCEPTANCE_ENV=environment, ACCEPTANCE_SECRET_KEY="k" * 60,
                   ACCEPTANCE_CREDENTIALS_KEY="my-credentials-key",
                   ACCEPTANCE_REPORT_SIGNING_PKCS12="/dev/null")
    refused = manage(env, "check")
    assert refused.returncode == 2
    assert refused.stderr.startswith("refusing to start: ACCEPTANCE_CREDENTIALS_KEY is not a "
                                     "Fernet key (32 url-safe base64-encoded bytes: ")
    assert "my-credentials-key" not in refused.stderr and "Traceback" not in refused.stderr
