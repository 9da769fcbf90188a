"""Soak fixtures: a lab engagement of a ``soak-*`` scenario (real sshd nodes, a real network
namespace with veth paths, the stand-in array and engine running) with G1–G3 set passed by
the test itself, so that G4 may run; and ``run_gate`` as a person runs it."""

import io

import pytest
from django.core.management import call_command

from gates.models import Gate


@pytest.fixture
def soak_lab(transactional_db):
    """``soak_lab(scenario, seconds=30, **soak) -> engagement``; ``soak`` overrides figures of
    the scenario's ``soak`` section (runners/lab/scenarios.py)."""
    from runners.lab.services import lab_up

    def start(scenario: str, seconds: int = 30, **soak):
        engagement, _ = lab_up(scenario_name=scenario,
                               overrides={"soak": {"seconds": seconds, **soak}})
        # G4 runs after G1–G3 (gate order); those gates are not what these tests are about.
        Gate.objects.filter(engagement=engagement, code__in=["G1", "G2", "G3"]).update(
            state=Gate.State.PASSED)
        return engagement

    return start


def run_gate(engagement: str, gate: str, *args: str):
    out, err = io.StringIO(), io.StringIO()
    with pytest.raises(SystemExit) as exit_info:
        call_command("run_gate", engagement, gate, *args, stdout=out, stderr=err)
    return exit_info.value.code, out.getvalue(), err.getvalue()
