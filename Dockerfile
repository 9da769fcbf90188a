# The service image: Debian 12 + the same install script as a developer's machine.
FROM python:3.11-slim-bookworm
WORKDIR /srv/acceptance
COPY . .
RUN bash scripts/setup --install-only
ENV PATH=/srv/acceptance/.venv/bin:$PATH
CMD ["python", "manage.py", "runserver", "0.0.0.0:8000"]
