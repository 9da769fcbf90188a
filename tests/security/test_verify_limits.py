"""The verify page refuses a file over REPORT_VERIFY_MAX_BYTES before reading it, and a junk
file just under the limit costs little: nobody holds a worker for seconds with one upload."""

import time

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from tests.api.conftest import make_user

pytestmark = pytest.mark.django_db


@pytest.fixture
def customer(users):
    return users["customer"]


def test_a_file_over_the_limit_is_413_before_any_check(client, customer):
    client.force_login(customer)
    started = time.monotonic()
    response = client.post("/reports/verify/", {"pdf": SimpleUploadedFile(
        "big.pdf", b"%PDF-1.7\n" + b"\0" * (21 * 1024 * 1024), "application/pdf")})
    assert response.status_code == 413
    assert "The file is larger than 20 MB" in response.content.decode()
    assert time.monotonic() - started < 5


@pytest.mark.parametrize("junk", [b"%PDF-1.7\n" + b"x" * (19 * 1024 * 1024),
                                  b"%PDF-1.7\n" + b"1 0 obj << /A [" * (1024 * 1024)])
def test_junk_just_under_the_limit_is_refused_quickly(client, junk):
    client.force_login(make_user("someone", None))  # any logged-in person may verify
    started = time.monotonic()
    response = client.post("/reports/verify/", {"pdf": SimpleUploadedFile(
        "junk.pdf", junk, "application/pdf")})
    elapsed = time.monotonic() - started
    assert response.status_code == 200 and "Not valid" in response.content.decode()
    assert elapsed < 5, elapsed
