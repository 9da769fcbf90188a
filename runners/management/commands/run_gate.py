"""``manage.py run_gate ENGAGEMENT G1|G2|G3|G4``: the main job.

Dispatches the gate's probes (Celery tasks over SSH) — for a soak gate (G4), the soak
(``runners.soak``) — waits for the decision and prints the per-criterion table, the decision
and ``report: PATH``. Exit status: 0 passed, 1 stopped, 2 the run itself failed or was refused
(no decision) — a task broker that does not answer is such a refusal ("refused: the task broker
is not answering (…)"), and a database that stays away while waiting ends the wait with one
line (the run goes on; the sweep settles it).
"""

import getpass
import sys
import time

from django.core.management.base import BaseCommand
from django.db import Error as DatabaseError  # any driver fault: also InterfaceError
from django.db import connection as db_connection

from acceptance.models import Engagement
from acceptance.units import measurement_text
from gates.services import GateRefused, gate_get
from runners.dispatch import ConfirmationRequired
from runners.doorbell import BrokerUnavailable
from runners.launch import LaunchInvalid, gate_launch, runs_recover
from runners.models import GateRun
from runners.probes import PROBES

EXIT_PASSED, EXIT_STOPPED, EXIT_FAILED = 0, 1, 2
DATABASE_WAIT_S = 120.0  # a database away longer than this while waiting ends the wait


class Command(BaseCommand):
    help = "Run a gate's probes on the engagement's nodes and decide pass / stop."
    #: how often a waiting command runs recovery itself (a dead worker, a missing report)
    RECOVERY_EVERY_S = 30.0

    def add_arguments(self, parser):
        parser.add_argument("engagement", help="engagement name, e.g. lab-healthy")
        parser.add_argument("gate", help="gate code: G1 … G4 (G4: the soak)")
        parser.add_argument("--timeout", type=float, default=6 * 3600,
                            help="seconds to wait for the decision (default 6 h)")
        parser.add_argument("--started-by", default=getpass.getuser(),
                            help="who launched the run (recorded)")
        parser.add_argument("--confirm", action="store_true",
                            help="required to run a gate that has passed again (its new "
                                 "decision replaces the pass); needs --reason")
        parser.add_argument("--reason", default="",
                            help="why (audit trail): for --confirm and --node")
        parser.add_argument("--node", default="",
                            help="re-run this node alone of the gate's latest finished attempt; "
                                 "the other nodes' evidence is carried over (needs --reason)")
        parser.add_argument("--probe-timeout", action="append", default=[], metavar="PROBE=S",
                            help="override a probe's timeout for this run, e.g. "
                                 "fio_seqread=120 (repeatable)")

    def fail(self, message: str) -> None:
        self.stderr.write(message)
        sys.exit(EXIT_FAILED)

    def parse_timeouts(self, items: list[str]) -> dict[str, int]:
        timeouts = {}
        for item in items:
            name, equals, seconds = item.partition("=")
            if not equals:
                self.fail(f"error: --probe-timeout {item!r}: expected PROBE=SECONDS, "
                          f"e.g. fio_seqread=120")
            if name not in PROBES:
                self.fail(f"error: --probe-timeout {item!r}: unknown probe {name!r} "
                          f"(probes: {', '.join(sorted(PROBES))})")
            if not seconds.isdigit() or not 1 <= int(seconds) <= 7 * 24 * 3600:
                self.fail(f"error: --probe-timeout {item!r}: seconds must be 1 … 604800")
            timeouts[name] = int(seconds)
        return timeouts

    def handle(self, *args, engagement, gate, timeout, started_by, probe_timeout, confirm,
               reason, node, **options):
        timeouts = self.parse_timeouts(probe_timeout)
        found = Engagement.objects.filter(name=engagement).first()
        if found is None:
            self.fail(f"error: no engagement named {engagement!r}")
        try:
            gate_obj = gate_get(engagement=found, code=gate)
            gate_run = gate_launch(gate=gate_obj, started_by=started_by, reason=reason,
                                   confirmed=confirm, probe_timeouts=timeouts, node=node)
        except LaunchInvalid as error:
            option = {"probe_timeouts": "--probe-timeout", "node": "--node"}.get(error.field)
            self.fail(f"error: {option}: {error}" if option else f"error: {error}")
        except ConfirmationRequired as refusal:
            self.fail(f"refused: {refusal} (run_gate … --confirm --reason '…')")
        except GateRefused as refusal:
            self.fail(f"refused: {refusal}")
        except BrokerUnavailable as refusal:
            self.fail(f"refused: {refusal}")
        if gate_obj.is_soak:
            self.wait_soak(found, gate_obj, gate_run, timeout)
            return
        self.stdout.write(f"{found.name} {gate_obj.code} {gate_obj.name}: run #{gate_run.attempt} "
                          f"(gate run id {gate_run.id}) dispatched to "
                          f"{gate_run.node_jobs.count()} node(s)")
        self.wait(gate_run, timeout)
        self.finish(gate_run)

    def wait(self, gate_run, timeout: float) -> None:
        """Wait until ``gate_run`` is over (a worker decides it when a broker is configured),
        running recovery now and then so that a dead worker cannot keep us waiting."""
        deadline = time.monotonic() + timeout
        next_recovery = time.monotonic() + self.RECOVERY_EVERY_S
        database_lost_at = None
        while True:
            try:
                gate_run.refresh_from_db()
                if gate_run.state in (GateRun.State.DONE, GateRun.State.FAILED,
                                      GateRun.State.CANCELLED):
                    return
                if time.monotonic() > next_recovery:  # a dead worker must not keep us waiting
                    try:
                        runs_recover()
                    except BrokerUnavailable:
                        pass  # the sweep is tried again later; the run is still waited for
                    next_recovery = time.monotonic() + self.RECOVERY_EVERY_S
                database_lost_at = None
            except DatabaseError as error:  # reconnect and wait on, for a bound
                db_connection.close()
                database_lost_at = database_lost_at or time.monotonic()
                if time.monotonic() - database_lost_at > DATABASE_WAIT_S:
                    reason = (str(error).strip().splitlines() or [type(error).__name__])[0]
                    self.fail(f"error: the database is not answering ({reason}); run "
                              f"#{gate_run.attempt} (gate run id {gate_run.id}) goes on without "
                              f"this command: follow it with tail_run or the web page")
            if time.monotonic() > deadline:
                self.fail(f"error: no decision after {timeout:g} s; run #{gate_run.attempt} is "
                          f"still {gate_run.state}")
            time.sleep(0.5)

    def wait_soak(self, engagement, gate, gate_run, timeout: float) -> None:
        """Wait for the soak's decision, printing its progress now and then."""
        soak = gate_run.soak
        self.stdout.write(f"{engagement.name} {gate.code} {gate.name}: soak run "
                          f"#{gate_run.attempt} (gate run id {gate_run.id}) on "
                          f"{soak.agents.count()} node(s), {soak.faults.count()} fault "
                          f"window(s); plan sha256 {soak.plan_sha256}")
        self.stdout.write(f"plan: {soak.plan['duration_s'] / 3600:g} h, compressed "
                          f"×{soak.time_compression:g} to {soak.duration_s:.0f} s")
        deadline = time.monotonic() + timeout
        next_recovery = next_note = time.monotonic() + 10
        while True:
            gate_run.refresh_from_db()
            if gate_run.state in (GateRun.State.DONE, GateRun.State.FAILED,
                                  GateRun.State.CANCELLED):
                break
            if time.monotonic() > next_recovery:  # a dead worker must not stop the soak
                runs_recover()
                next_recovery = time.monotonic() + 10
            if time.monotonic() > next_note:
                soak.refresh_from_db()
                self.stdout.write(f"soak: {soak.state}, {soak.loaded_s:.0f} s collected … "
                                  f"checks: " + ", ".join(
                                      f"{k} {v['state']}" for k, v in soak.checks.items()))
                next_note = time.monotonic() + max(30.0, soak.duration_s / 10)
            if time.monotonic() > deadline:
                self.fail(f"error: no decision after {timeout:g} s; the soak is still "
                          f"{soak.state} (it goes on: manage.py soak status {engagement.name})")
            time.sleep(0.5)
        self.print_soak(gate_run)
        self.finish(gate_run)

    def print_soak(self, gate_run) -> None:
        soak = gate_run.soak
        for fault in soak.faults.select_related("node"):
            span = (f"{fault.injected_at:%H:%M:%S}–"
                    f"{fault.healed_at:%H:%M:%S}" if fault.injected_at and fault.healed_at
                    else "not injected")
            self.stdout.write(f"fault window {fault.name}: {fault.kind} on {fault.node.name} "
                              f"{span} UTC, {fault.state}"
                              + (f" by the {fault.heal_how}" if fault.heal_how else "")
                              + (f" ({fault.error})" if fault.error else ""))
        for gap in soak.gaps.all():
            end = f"{gap.ended_at:%H:%M:%S}" if gap.ended_at else "…"
            self.stdout.write(f"collection gap {gap.started_at:%H:%M:%S}–{end} UTC: "
                              f"{gap.reason}")
        if soak.stop_reason:
            self.stdout.write(f"stopped on: {soak.stop_reason}")

    def finish(self, gate_run) -> None:
        """Print what was decided (or why nothing was) and exit with the documented status."""
        self.print_probe_runs(gate_run)
        if gate_run.state == GateRun.State.CANCELLED:
            self.fail(f"run cancelled by {gate_run.cancel_requested_by} (no decision)")
        if gate_run.state == GateRun.State.FAILED:
            if hasattr(gate_run, "decision"):  # decided, its signed report missing: not counted
                self.fail(f"run failed (its decision has no signed report yet): "
                          f"{gate_run.error}")
            self.fail(f"run failed (no decision): {gate_run.error}")
        decision = gate_run.decision
        self.print_table(decision)
        self.stdout.write(f"decision: {decision.outcome.upper()}: {decision.sentence}")
        report = decision.report
        if report.simulated:
            self.stdout.write("evidence: SIMULATED (lab stand-in tools), not customer hardware")
        if gate_run.origin == GateRun.Origin.IMPORTED:
            self.stdout.write("evidence: IMPORTED from collection bundles (not run by the service)")
        self.stdout.write(f"report: {report.path}")
        sys.exit(EXIT_PASSED if decision.outcome == "passed" else EXIT_STOPPED)

    def print_probe_runs(self, gate_run):
        runs = gate_run.probe_runs.select_related("node")
        failed = [r for r in runs if r.state == "failed"]
        self.stdout.write(f"evidence runs: {len(runs)} ({len(failed)} failed, "
                          f"{sum(1 for r in runs if r.simulated)} simulated by lab stand-ins)")

    def print_table(self, decision):
        rows = [("criterion", "requirement", "measured", "verdict", "source")]
        for v in decision.verdicts.all():
            snap = v.criterion_snapshot
            measured = "—" if v.measured_value is None else measurement_text(v.measured_value,
                                                                              v.unit)
            rows.append((f"{snap['metric']}", snap["requirement"], measured, v.verdict.upper(),
                         snap["source"]))
        widths = [max(len(r[i]) for r in rows) for i in range(4)]
        for row in rows:
            cells = [row[i].ljust(widths[i]) for i in range(4)] + [row[4]]
            self.stdout.write("  ".join(cells).rstrip())
