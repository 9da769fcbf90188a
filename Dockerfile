# The service image, two stages: "build" compiles the Python dependencies (build tools stay
# there), "runtime" has the interpreter, the runtime libraries WeasyPrint needs, the pinned
# runtime dependencies (no test extras, no Chromium) and the source, run by a non-root user.
# Static files are collected at build time under hashed names (production's storage).
# Every process is `python manage.py …`: docker-compose.yml picks the role (serve --only web,
# worker or beat; migrate), the same commands `manage.py serve` starts on one machine.

FROM python:3.11-slim-bookworm AS build
RUN apt-get update \
 && apt-get install -y --no-install-recommends build-essential libffi-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY pyproject.toml ./
# The runtime dependencies only, exactly as pinned in pyproject.toml's [project] dependencies.
RUN python -c "import tomllib; print('\n'.join(tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies']))" > requirements.txt \
 && python -m venv /opt/venv \
 && /opt/venv/bin/pip install --no-cache-dir --upgrade pip \
 && /opt/venv/bin/pip install --no-cache-dir -r requirements.txt

FROM python:3.11-slim-bookworm AS runtime
# postgresql-client: pg_dump and pg_restore for `manage.py backup` / `restore` (bookworm's 15,
# the same major version as compose's postgres:15).
RUN apt-get update \
 && apt-get install -y --no-install-recommends libpango-1.0-0 libpangoft2-1.0-0 \
      libharfbuzz0b shared-mime-info fonts-noto-cjk postgresql-client \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --home-dir /var/lib/acceptance --create-home acceptance
COPY --from=build /opt/venv /opt/venv
WORKDIR /srv/acceptance
COPY --chown=root:root . .
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    ACCEPTANCE_ENV=production \
    ACCEPTANCE_VAR_DIR=/var/lib/acceptance \
    ACCEPTANCE_STATIC_ROOT=/srv/acceptance/static
# collectstatic needs settings, and production settings refuse to load without their secrets:
# throw-away values for this one command (the image carries none; the credentials key must be
# well-formed, so an all-zero Fernet key that encrypts nothing).
RUN ACCEPTANCE_SECRET_KEY=collectstatic-only ACCEPTANCE_CREDENTIALS_KEY=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA= \
    ACCEPTANCE_REPORT_SIGNING_PKCS12=/dev/null ACCEPTANCE_VAR_DIR=/tmp/collectstatic \
    python manage.py collectstatic --no-input -v 0 \
 && rm -rf /tmp/collectstatic
USER acceptance
VOLUME ["/var/lib/acceptance"]
EXPOSE 8000
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
  CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=4)"]
CMD ["python", "manage.py", "serve", "--only", "web", "--bind", "0.0.0.0:8000"]
