"""Who may open which of the engineer's pages: every URL of ``runners.urls`` for five personas.

Anonymous people are sent to the login page; a customer of another organisation (or someone
with no role) learns nothing — 404 on pages that show, 403 on actions, no engagement data in
either; the engagement's own customer and project managers read runs and nodes but every action
answers 403; engineers (and superusers) may do everything.
"""

from datetime import date

import pytest
from django.urls import reverse
from django.utils import timezone

from acceptance.models import Credential, Node
from gates.services import engagement_create
from runners import urls as runner_urls
from runners.lab import server
from runners.lab import urls as lab_urls
from runners.models import GateRun, NodeJob, ProbeRun

SECRET_OUTPUT = b"ACME-PRIVATE-OUTPUT-7f3a: fio read 11.0 GB/s\n"


@pytest.fixture
def site(db):
    """An ACME engagement with one inference node (nothing listens on its port) and one
    finished run of G2 whose probe output is ACME's."""
    engagement = engagement_create(name="acme-sh1", customer="ACME",
                                   start_date=date(2026, 11, 30))
    private, _public = server.keypair()
    credential = Credential.from_secret("acme-sh1-gpu-01", private)
    credential.save()
    node = Node.objects.create(
        engagement=engagement, name="gpu-01", role=Node.Role.INFERENCE, address="127.0.0.1",
        port=server.free_port(), ssh_user="acctest", host_key=server.keypair()[1],
        credential=credential,
        interface="ens1f0", fio_target="/dev/nvme1n1")
    g2 = engagement.gates.get(code="G2")
    now = timezone.now()
    run = GateRun.objects.create(gate=g2, attempt=1, started_by="eng-erin", state="done",
                                 finished_at=now)
    NodeJob.objects.create(gate_run=run, node=node, state="done")
    ProbeRun.objects.create(gate_run=run, node=node, probe="fio_seqread", parser="fio",
                            parser_version="1", command="fio --name=seqread", state="parsed",
                            stdout=SECRET_OUTPUT, stdout_size=len(SECRET_OUTPUT),
                            started_at=now, finished_at=now, exit_code=0)
    return engagement, node, run


def requests(site):
    """(label, url, method, data, read_only, engineer's expected status) for every URL."""
    engagement, node, run = site
    name = engagement.name
    closed_port = server.free_port()
    return [
        ("node-list", reverse("node-list", args=[name]), "get", None, True, 200),
        ("run-detail", reverse("run-detail", args=[run.id]), "get", None, True, 200),
        ("run-live", reverse("run-live", args=[run.id]), "get", None, True, 200),
        ("run-list", reverse("run-list", args=[name]) + "?gate=G2", "get", None, True, 200),
        ("engagement-export", reverse("engagement-export", args=[name, "measurements"]), "get",
         None, True, 200),
        ("run-export", reverse("run-export", args=[run.id, "decisions"]), "get", None, True,
         200),
        ("node-register", reverse("node-register", args=[name]), "get", None, False, 200),
        ("node-register", reverse("node-register", args=[name]), "post",
         {"step": "fetch", "address": "127.0.0.1", "port": closed_port}, False, 200),
        ("node-repin", reverse("node-repin", args=[name, node.name]), "get", None, False, 200),
        # nothing listens on the node's port: the page says the key cannot be read
        ("node-repin", reverse("node-repin", args=[name, node.name]), "post",
         {"step": "fetch"}, False, 200),
        ("gate-run-start", reverse("gate-run-start", args=[name, "G2"]), "get", None, False,
         200),
        # G1 has not passed: refused (with a message), nothing created.
        ("gate-run-start", reverse("gate-run-start", args=[name, "G2"]), "post", {}, False, 302),
        ("run-cancel", reverse("run-cancel", args=[run.id]), "post", {}, False, 302),
        ("run-rerun", reverse("run-rerun", args=[run.id]), "get", None, False, 200),
        # G1 has not passed: the form shows the refusal, nothing created.
        ("run-rerun", reverse("run-rerun", args=[run.id]), "post",
         {"node": "gpu-01", "reason": "node back"}, False, 200),
        ("lab", reverse("lab"), "get", None, False, 200),
        ("lab", reverse("lab"), "post", {"scenario": "healthy", "nodes": 0}, False, 200),
        ("gate-evidence", reverse("gate-evidence", args=[name, "G2"]), "get", None, False, 200),
        ("gate-evidence", reverse("gate-evidence", args=[name, "G2"]), "post", {}, False, 200),
        ("collection-script", reverse("collection-script", args=[name, "G2", node.name]), "get",
         None, False, 200),
    ]


def call(client, method, url, data):
    return client.get(url) if method == "get" else client.post(url, data or {})


def assert_no_data(response):
    assert b"acme-sh1" not in response.content
    assert SECRET_OUTPUT.strip() not in response.content
    assert b"gpu-01" not in response.content


def test_every_url_of_the_engineer_pages_is_covered(site):
    covered = {label for label, *_ in requests(site)}
    assert {p.name for p in runner_urls.urlpatterns + lab_urls.urlpatterns} == covered


def test_it_sends_anonymous_people_to_the_login_page(site, people):
    anonymous = people("ACME").anonymous
    for label, url, method, data, _read, _status in requests(site):
        response = call(anonymous.client, method, url, data)
        assert response.status_code == 302, label
        assert response["Location"].startswith("/accounts/login/?next="), label


def test_it_shows_a_customer_of_another_organisation_nothing(site, people):
    outsider = people("ACME").outsider
    for label, url, method, data, read_only, _status in requests(site):
        response = call(outsider.client, method, url, data)
        assert response.status_code == (404 if read_only else 403), (label, method)
        assert_no_data(response)


def test_it_shows_someone_without_a_role_nothing(site, people):
    nobody = people("ACME").nobody
    for label, url, method, data, read_only, _status in requests(site):
        response = call(nobody.client, method, url, data)
        assert response.status_code == (404 if read_only else 403), (label, method)
        assert_no_data(response)


def test_it_lets_the_engagements_customer_read_runs_and_nodes_but_do_nothing(site, people):
    customer = people("ACME").customer
    for label, url, method, data, read_only, _status in requests(site):
        response = call(customer.client, method, url, data)
        assert response.status_code == (200 if read_only else 403), (label, method)
    _engagement, _node, run = site
    page = customer.client.get(reverse("run-detail", args=[run.id]))
    assert SECRET_OUTPUT.decode().strip() in page.content.decode()  # their own run's output
    assert reverse("run-rerun", args=[run.id]).encode() not in page.content
    assert reverse("run-cancel", args=[run.id]).encode() not in page.content
    nodes = customer.client.get(reverse("node-list", args=["acme-sh1"]))
    assert b"Register a node" not in nodes.content and b"Launch" not in nodes.content


def test_it_lets_project_managers_read_runs_but_not_act(site, people):
    manager = people("ACME").manager
    for label, url, method, data, read_only, _status in requests(site):
        response = call(manager.client, method, url, data)
        assert response.status_code == (200 if read_only else 403), (label, method)


def test_it_lets_engineers_do_everything(site, people):
    engineer = people("ACME").engineer
    for label, url, method, data, _read_only, status in requests(site):
        response = call(engineer.client, method, url, data)
        assert response.status_code == status, (label, method, response.content[:300])
    # The refused launch and re-run created nothing.
    _engagement, _node, run = site
    assert GateRun.objects.count() == 1


def test_superusers_are_engineers_here(site, django_user_model, client):
    admin = django_user_model.objects.create_superuser("root-rita", password=None)
    client.force_login(admin)
    assert client.get(reverse("node-register", args=["acme-sh1"])).status_code == 200
    assert client.get(reverse("lab")).status_code == 200


def test_a_run_that_does_not_exist_is_404_for_everyone(site, people):
    engineer = people("ACME").engineer
    assert engineer.client.get(reverse("run-detail", args=[999999])).status_code == 404
    assert engineer.client.get(reverse("node-list", args=["no-such"])).status_code == 404
