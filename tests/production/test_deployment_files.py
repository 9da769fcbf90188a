"""docker-compose.yml, the Dockerfile and .dockerignore, read as data (no container engine runs
here): they parse, every command they run exists and is the one ``manage.py serve`` starts,
every long-running service has a healthcheck and a restart policy, every secret comes from the
environment (.env.example lists each variable), and the image is multi-stage, non-root, with
runtime dependencies only."""

import json
import re
import shlex

import pytest
import yaml
from django.core.management import get_commands
from django.urls import resolve

from tests.production.helpers import ROOT, base_env, manage, production_env

COMPOSE = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
SERVICES = COMPOSE["services"]
OURS = [name for name, service in SERVICES.items() if service.get("build")]
DOCKERFILE = (ROOT / "Dockerfile").read_text()


def instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) per Dockerfile instruction, continuation lines joined."""
    joined = re.sub(r"\\\n", " ", "\n".join(
        line for line in text.splitlines() if not line.lstrip().startswith("#")))
    return [(line.split(None, 1)[0].upper(), line.split(None, 1)[1].strip())
            for line in joined.splitlines() if line.strip()]


STAGES: list[list[tuple[str, str]]] = []
for instruction in instructions(DOCKERFILE):
    if instruction[0] == "FROM":
        STAGES.append([])
    STAGES[-1].append(instruction)


def manage_commands(argv: list[str]) -> list[str]:
    """The management command an argv runs, asserting it is `python manage.py COMMAND …`."""
    assert argv[:2] == ["python", "manage.py"], argv
    assert argv[2] in get_commands(), f"{argv[2]} is not a management command"
    return argv[2:]


def test_compose_has_the_services_and_our_four_run_the_image():
    assert set(SERVICES) == {"migrate", "web", "worker", "beat", "redis", "postgres"}
    assert OURS == ["migrate", "web", "worker", "beat"]


@pytest.mark.parametrize("name", ["web", "worker", "beat"])
def test_each_role_runs_the_command_serve_starts_for_it(name, tmp_path):
    argv = manage_commands(SERVICES[name]["command"])
    assert argv[:3] == ["serve", "--only", name]
    env = base_env(tmp_path / "var")
    in_compose = manage(env, *argv, "--print")
    assert in_compose.returncode == 0, in_compose.stderr
    whole = manage(env, "serve", "--workers", "2", "--bind", "0.0.0.0:8000", "--print")
    lines = whole.stdout.splitlines()
    # the process-level test starts `serve --workers 2`: the same children, role by role (the
    # worker container runs the shipped 2 × 64 threads: 128 node jobs in one wave)
    assert in_compose.stdout.splitlines() == [
        x for x in lines if x.split(":")[0] in ({name} if name != "worker"
                                                else {"worker-1", "worker-2"})]


def test_web_worker_and_beat_wait_for_the_one_shot_migrate():
    assert manage_commands(SERVICES["migrate"]["command"]) == ["migrate", "--no-input"]
    assert SERVICES["migrate"]["depends_on"] == {"postgres": {"condition": "service_healthy"}}
    for name in ("web", "worker", "beat"):
        assert SERVICES[name]["depends_on"]["migrate"] == {
            "condition": "service_completed_successfully"}
        assert "migrate" not in " ".join(SERVICES[name]["command"])


def test_every_long_running_service_has_a_healthcheck_and_a_restart_policy():
    for name, service in SERVICES.items():
        assert service.get("restart") in ("unless-stopped", "on-failure:5"), name
        if name == "migrate":  # one-shot: it exits; web, worker and beat wait for its success
            assert service["healthcheck"] == {"disable": True}
            continue
        check = service["healthcheck"]
        assert check["test"][0] in ("CMD", "CMD-SHELL") and check["interval"], name
    web_check = " ".join(SERVICES["web"]["healthcheck"]["test"])
    assert "http://127.0.0.1:8000/readyz" in web_check
    assert resolve("/readyz").url_name == "readyz" and resolve("/healthz").url_name == "healthz"
    worker_check = SERVICES["worker"]["healthcheck"]["test"][1]
    assert shlex.split(worker_check)[:5] == ["celery", "-A", "acceptance", "inspect", "ping"]
    assert "worker-1@$$HOSTNAME" in worker_check  # the name serve gives the first worker


def test_redis_keeps_an_append_only_file_on_a_volume():
    redis = SERVICES["redis"]
    command = redis["command"]
    assert command[command.index("--appendonly") + 1] == "yes"
    assert "redis-data:/data" in redis["volumes"] and "redis-data" in COMPOSE["volumes"]


def test_every_secret_comes_from_the_environment_and_env_example_lists_each():
    text = (ROOT / "docker-compose.yml").read_text()
    used = set(re.findall(r"\$\{([A-Z0-9_]+)", text))
    example = (ROOT / ".env.example").read_text()
    listed = set(re.findall(r"^([A-Z0-9_]+)=", example, flags=re.MULTILINE))
    assert used <= listed, f"missing from .env.example: {sorted(used - listed)}"
    assert {"POSTGRES_PASSWORD", "ACCEPTANCE_SECRET_KEY", "ACCEPTANCE_CREDENTIALS_KEY"} <= used
    assert SERVICES["postgres"]["environment"]["POSTGRES_PASSWORD"].startswith(
        "${POSTGRES_PASSWORD:?")
    env = SERVICES["web"]["environment"]
    for key in ("ACCEPTANCE_SECRET_KEY", "ACCEPTANCE_CREDENTIALS_KEY"):
        assert env[key] == f"${{{key}:?set {key}}}"
    assert "${POSTGRES_PASSWORD:?" in env["DATABASE_URL"]
    # the signing identity is a compose secret, a file under /run/secrets
    assert set(COMPOSE["secrets"]) == {"signing_pkcs12", "signing_passphrase"}
    assert env["ACCEPTANCE_REPORT_SIGNING_PKCS12"] == "/run/secrets/signing_pkcs12"
    assert env["ACCEPTANCE_REPORT_SIGNING_PASSPHRASE_FILE"] == "/run/secrets/signing_passphrase"
    for name in ("web", "worker", "beat"):
        assert SERVICES[name]["secrets"] == ["signing_pkcs12", "signing_passphrase"]
    assert env["ACCEPTANCE_ENV"] == "production"
    assert not re.search(r"(?i)password:\s*\w", text.replace("POSTGRES_PASSWORD: ${", ""))


def test_the_image_is_multi_stage_runtime_only_and_not_root():
    assert [stage[0][1] for stage in STAGES] == ["python:3.11-slim-bookworm AS build",
                                                 "python:3.11-slim-bookworm AS runtime"]
    runtime = dict(reversed(STAGES[1]))  # the first of each instruction
    runtime_text = json.dumps(STAGES[1])
    assert "build-essential" in json.dumps(STAGES[0]) and "build-essential" not in runtime_text
    for absent in ("[test]", "chromium", "playwright", "scripts/setup", "pytest"):
        assert absent not in runtime_text, absent
    assert "COPY --from=build /opt/venv /opt/venv" in [f"COPY {a}" for i, a in STAGES[1]
                                                        if i == "COPY"]
    users = [a for i, a in STAGES[1] if i == "USER"]
    assert users == ["acceptance"] and "useradd --system --uid 10001" in runtime["RUN"]
    assert "ACCEPTANCE_ENV=production" in runtime["ENV"]
    cmd = json.loads(runtime["CMD"])
    assert cmd == SERVICES["web"]["command"]  # the image alone runs the web role
    manage_commands(cmd)
    health = runtime["HEALTHCHECK"]
    assert "http://127.0.0.1:8000/healthz" in health


def test_the_image_collects_static_files_with_the_production_storage():
    runs = [a for i, a in STAGES[1] if i == "RUN" and "collectstatic" in a]
    assert len(runs) == 1
    argv = shlex.split(runs[0].split("&&")[0])
    while "=" in argv[0]:  # the throw-away environment of that one command
        argv.pop(0)
    assert manage_commands(argv) == ["collectstatic", "--no-input", "-v", "0"]
    # ENV sets ACCEPTANCE_ENV=production before it: the manifest (hashed names) storage
    assert STAGES[1].index(next(x for x in STAGES[1] if x[0] == "ENV")) < STAGES[1].index(
        next(x for x in STAGES[1] if x[0] == "RUN" and "collectstatic" in x[1]))


def test_the_dockerignore_keeps_var_git_and_venv_out():
    ignored = {line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines()
               if line.strip() and not line.startswith("#")}
    assert {"var/", ".git", ".venv", ".env"} <= ignored


@pytest.mark.slow
def test_collectstatic_writes_hashed_names_under_the_production_settings(tmp_path):
    env = production_env(tmp_path / "var", tmp_path / "none.p12", "")
    done = manage(env, "collectstatic", "--no-input", "-v", "0")
    assert done.returncode == 0, done.stderr
    manifest = json.loads((tmp_path / "var" / "static" / "staticfiles.json").read_text())
    hashed = manifest["paths"]
    assert hashed and all(re.search(r"\.[0-9a-f]{12}(\.|$)", v) for v in hashed.values())
    assert any((tmp_path / "var" / "static" / f"{v}.gz").exists() for v in hashed.values())


def test_the_image_has_what_backup_and_restore_run_on_postgresql():
    """`manage.py backup` / `restore` in a container (compose runs PostgreSQL) call pg_dump and
    pg_restore; without the client they answer 'pg_dump is not installed'."""
    runtime_runs = " ".join(a for i, a in STAGES[1] if i == "RUN")
    assert re.search(r"apt-get install [^&]*\bpostgresql-client\b", runtime_runs)
    assert SERVICES["postgres"]["image"] == "postgres:15"  # bookworm's client is 15 too


def test_env_example_says_the_secret_files_must_be_readable_by_the_image_user():
    """Compose mounts a file secret with the host file's owner and mode: a 0600 file of the
    operator's is unreadable to the image's user and /readyz stays 503 on 'signing'."""
    uid = re.search(r"useradd --system --uid (\d+)", DOCKERFILE).group(1)
    example = (ROOT / ".env.example").read_text()
    assert f"sudo chown {uid} secrets/signing.p12 secrets/signing.pass" in example
    assert f"sudo chown {uid} secrets/signing.*" in (ROOT / "README.md").read_text()


def test_the_images_collectstatic_environment_loads_the_production_settings(tmp_path):
    """The throw-away values of the image's collectstatic RUN pass the settings' checks (a
    malformed credentials key is refused at start)."""
    run = next(a for i, a in STAGES[1] if i == "RUN" and "collectstatic" in a)
    argv = shlex.split(run.split("&&")[0])
    throwaway = {}
    while "=" in argv[0]:
        name, _, value = argv.pop(0).partition("=")
        throwaway[name] = value
    assert throwaway.pop("ACCEPTANCE_VAR_DIR") == "/tmp/collectstatic"
    done = manage(base_env(tmp_path / "var", ACCEPTANCE_ENV="production", **throwaway), "check")
    assert (done.returncode, done.stderr) == (0, "")
