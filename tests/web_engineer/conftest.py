"""People for the engineer's pages: an engineer, a project manager, a customer of the
engagement's organisation, a customer of another organisation and someone with no role."""

from types import SimpleNamespace

import pytest
from django.test import Client

from acceptance.models import Membership, Organisation


def person(django_user_model, username, role=None, organisation=None):
    user = django_user_model.objects.create_user(username)  # force_login: no password hashing
    if role:
        org = Organisation.objects.get_or_create(name=organisation)[0] if organisation else None
        Membership.objects.create(user=user, role=role, organisation=org)
    client = Client()
    client.force_login(user)
    return SimpleNamespace(user=user, client=client)


@pytest.fixture
def people(db, django_user_model):
    """``people(organisation)``: clients of each persona; the customer belongs to
    ``organisation`` (the engagement's), the outsider to another one."""

    def make(organisation: str):
        return SimpleNamespace(
            anonymous=SimpleNamespace(user=None, client=Client()),
            engineer=person(django_user_model, "eng-erin", Membership.Role.ENGINEER),
            manager=person(django_user_model, "pm-paula", Membership.Role.PROJECT_MANAGER),
            customer=person(django_user_model, "cust-carl", Membership.Role.CUSTOMER,
                            organisation),
            outsider=person(django_user_model, "other-olga", Membership.Role.CUSTOMER,
                            "Other Corp"),
            nobody=person(django_user_model, "no-role-nils"),
        )

    return make


@pytest.fixture(autouse=True)
def language_reset():
    """A request in Chinese leaves its language active in this thread; later tests (and the
    services' messages they check) start from the default language again."""
    yield
    from django.conf import settings
    from django.utils import translation

    translation.activate(settings.LANGUAGE_CODE)
