"""Input the API's schema allows but the service used to answer with 500 (numbers beyond 64
bits in integer filters, a JSON body that is not an object on soak pause/abort), and names with
a trailing newline the validators used to let in."""

import pytest
from django.core.exceptions import ValidationError
from rest_framework.test import APIClient

from acceptance import models
from acceptance.tokens import api_token_create
from runners.soak.models import Soak
from tests.soak.pages_fixtures import personas, recorded_soak

BIG = "602571792983934755667968"


@pytest.mark.parametrize("url, name", [
    (f"/api/node-jobs/?gate_run={BIG}", "gate_run"),
    (f"/api/measurements/?probe_run={BIG}", "probe_run"),
    (f"/api/measurements/?gate_run=-{BIG}", "gate_run"),
    (f"/api/decisions/?gate_run={BIG}", "gate_run"),
    (f"/api/reports/?decision={BIG}", "decision"),
    (f"/api/probe-runs/?evidence_of={BIG}", "evidence_of"),
])
def test_an_integer_filter_beyond_64_bits_is_400_naming_the_filter(ledger, client_for, url,
                                                                   name):
    response = client_for("customer").get(url)
    assert response.status_code == 400
    assert list(response.json()) == [name]
    assert "out of range (at most 9223372036854775807)" in response.json()[name]


def test_the_largest_64_bit_id_is_simply_not_found(ledger, client_for):
    response = client_for("customer").get(f"/api/node-jobs/?gate_run={2**63 - 1}")
    assert response.status_code == 200 and response.json()["results"] == []
    for url in (f"/api/gate-runs/{BIG}/", f"/api/reports/{BIG}/", f"/api/soaks/{BIG}/"):
        assert client_for("customer").get(url).status_code == 404, url


def _api(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Token " + api_token_create(user=user, name="t")[1])
    return client


@pytest.mark.django_db
@pytest.mark.parametrize("action", ["pause", "abort"])
def test_a_soak_action_with_a_body_that_is_not_an_object(action):
    soak = recorded_soak(drive_impact=True)
    people = personas("ACME")
    url = f"/api/soaks/{soak.id}/{action}/"
    outsider = _api(people.outsider.user).post(url, [None], format="json")
    assert outsider.status_code == 404
    customer = _api(people.customer.user).post(url, [None], format="json")
    assert customer.status_code == 403
    engineer = _api(people.engineer.user).post(url, [None], format="json")
    assert engineer.status_code == 400
    assert engineer.json() == {"non_field_errors": [
        "Invalid data. Expected a dictionary, but got list."]}
    response = _api(people.engineer.user).post(url, {"reason": ["a", "b"]}, format="json")
    assert response.status_code == 400 and list(response.json()) == ["reason"]
    assert Soak.objects.get(id=soak.id).state == "running"
    assert Soak.objects.get(id=soak.id).abort_requested_at is None


@pytest.mark.parametrize("validator, good", [
    ("name_validator", "acme.site-1"), ("interface_validator", "ens1f0"),
    ("device_path_validator", "/dev/nvme0n1"), ("ssh_user_validator", "acctest"),
    ("host_validator", "10.0.0.5"),
])
def test_model_validators_refuse_a_trailing_newline(validator, good):
    check = getattr(models, validator)
    check(good)
    with pytest.raises(ValidationError):
        check(good + "\n")
