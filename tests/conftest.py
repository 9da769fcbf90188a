"""Shared fixtures: private directories for lab servers, reports and signing keys; eager Celery.

Lab servers are real OpenSSH daemons on 127.0.0.1 (runners.lab.server); every one a test starts
is stopped when the test ends.
"""

import pytest

from acceptance.celery import app as celery_app


@pytest.fixture(autouse=True)
def restore_logging_handlers():
    """A command run through ManagementUtility calls django.setup(), which re-binds the root
    logger's console handler to whatever stderr pytest is capturing then; put them back."""
    import logging

    root = logging.getLogger()
    handlers = list(root.handlers)
    yield
    root.handlers[:] = handlers


@pytest.fixture(autouse=True)
def throttle_counts_reset():
    """Request counts of the API throttles and login failures live in the cache: each test
    starts from none, so the suite's many requests never reach a rate."""
    from django.core.cache import cache

    cache.clear()
    yield


@pytest.fixture(scope="session")
def signing_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("signing")


@pytest.fixture(autouse=True)
def private_dirs(settings, tmp_path, signing_dir):
    settings.LAB_DIR = tmp_path / "lab"
    settings.REPORTS_DIR = tmp_path / "reports"
    settings.OUTPUTS_DIR = tmp_path / "outputs"
    settings.SIGNING_DIR = signing_dir
    celery_app.conf.task_always_eager = True
    yield
    from runners.execution import SSH_POOL
    from runners.lab.services import lab_down

    SSH_POOL.close_all()  # connections kept by this test's jobs end with its lab servers
    lab_down()


@pytest.fixture
def lab(transactional_db):
    """``lab(scenario, nodes=1, **overrides) -> (engagement, array server)``: a lab engagement
    whose nodes are real sshd servers on loopback."""
    from runners.lab.services import lab_up

    def start(scenario: str, nodes: int = 1, **overrides):
        return lab_up(scenario_name=scenario, overrides=overrides or None, nodes=nodes)

    return start
