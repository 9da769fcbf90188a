"""Parsers are pure functions of bytes: no settings, private directories or lab servers."""

import pytest


@pytest.fixture(autouse=True)
def private_dirs():
    """Overrides the suite-wide fixture of tests/conftest.py, so these tests also run without
    pytest-django (``-p no:django``)."""
    yield
