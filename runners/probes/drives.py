"""G1 probes: the drives of the array (RUNBOOK §2.1 inventory, §2.3 self-test, §2.4 and §2.5
SMART / health, with nvme-cli or smartmontools)."""

from __future__ import annotations

from typing import Any

from runners.probes.base import DEVICE, Param, Probe

# The self-test is started, then its log polled until no test is running (RUNBOOK §2.3):
# one script so the probe is one command; $1 device, $2 poll interval (s), $3 max polls.
# The log is read once before the start: a poll that shows no test running counts only when
# the log has changed since (the newest entry is then the test this run started) or this run
# saw its test running; otherwise polling goes on, and after the last poll the probe fails
# naming the device (exit 125), as it does when the test is still running (exit 124).
SELF_TEST_SCRIPT = r"""
dev=$1 interval=$2 polls=$3
before=$(nvme self-test-log "$dev" -o json) || exit $?
nvme device-self-test "$dev" -n 0xffffffff -s 1 >&2 || exit $?
i=0 seen=0
while :; do
  out=$(nvme self-test-log "$dev" -o json) || exit $?
  if printf '%s' "$out" | grep -Eq '"Current Device Self-Test Operation" *: *0 *,'; then
    if [ "$seen" = 1 ] || [ "$out" != "$before" ]; then
      printf '%s\n' "$out"; exit 0
    fi
  else
    seen=1
  fi
  pct=$(printf '%s' "$out" | sed -n 's/.*Self-Test Completion" *: *\([0-9]*\).*/\1/p')
  [ -n "$pct" ] && echo "self-test progress: $pct%" >&2
  i=$((i + 1))
  if [ "$i" -ge "$polls" ]; then
    printf '%s\n' "$out"
    if [ "$seen" = 1 ]; then
      echo "$dev: self-test still running after $polls polls" >&2; exit 124
    fi
    echo "$dev: the newest self-test-log entry is not the test this run started" \
         "(the log did not change after $polls polls)" >&2; exit 125
  fi
  sleep "$interval"
done
"""

# The inventory (RUNBOOK §2.1). nvme-cli 2.x exits 1 ("Failed to scan topology: No such file or
# directory") on a machine whose kernel has no NVMe controller at all (no /sys/class/nvme): that
# is an inventory of 0 drives, not a failed probe. nvme's own error stays on stderr with a note;
# any other failure, and a missing nvme, still fail the run.
NVME_LIST_SCRIPT = r"""
command -v nvme >/dev/null || { echo "nvme: command not found" >&2; exit 127; }
nvme list -o json && exit 0
rc=$?
{ [ -e /sys/class/nvme ] || [ -e /sys/class/nvme-subsystem ]; } && exit "$rc"
echo "no /sys/class/nvme: the kernel sees no NVMe controller (nvme list exited $rc)" >&2
printf '{"Devices": []}\n'
"""


def _self_test_argv(p: dict[str, Any]) -> list[str]:
    return ["sh", "-c", SELF_TEST_SCRIPT, "nvme-self-test", p["device"],
            str(p["poll_interval"]), str(p["max_polls"])]


DRIVE_PROBES: tuple[Probe, ...] = (
    Probe(
        "nvme_inventory", "array", "nvme_list", ("nvme", "version"), 60, {},
        lambda p: ["sh", "-c", NVME_LIST_SCRIPT, "nvme-list"],
        "drive inventory on the array controller (RUNBOOK §2.1)",
        summary=lambda p: ("nvme list -o json (an empty list when the kernel has no NVMe "
                           "controller: no /sys/class/nvme)"),
    ),
    Probe(
        "nvme_self_test", "array", "nvme_self_test_log", ("nvme", "version"), 900,
        {"device": DEVICE, "poll_interval": Param(int, 10, 1, 60),
         "max_polls": Param(int, 60, 1, 360)},
        _self_test_argv, "short device self-test, started then polled (RUNBOOK §2.3)",
        progress=r"self-test progress: (\d+(?:\.\d+)?)%",
        summary=lambda p: (
            f"nvme device-self-test {p['device']} -n 0xffffffff -s 1; then "
            f"nvme self-test-log {p['device']} -o json every {p['poll_interval']} s until "
            f"no test runs (at most {p['max_polls']} polls)"
        ),
    ),
    Probe(
        "smartctl_health", "array", "smartctl", ("smartctl", "-V"), 120,
        {"device": DEVICE}, lambda p: ["smartctl", "-j", "-a", p["device"]],
        "SMART health, self-test log and exit-status bits with smartmontools "
        "(RUNBOOK §2.5; the alternative to nvme-cli)",
        # bit 0: command line error, bit 1: device open failed: no health data. Bits 2-7
        # are findings about the drive, reported in the JSON and kept as exit_status.
        parse_exit=lambda code: 0 <= code < 256 and code & 0b11 == 0,
    ),
    Probe(
        "nvme_smart_log", "array", "nvme_smart_log", ("nvme", "version"), 60,
        {"device": DEVICE}, lambda p: ["nvme", "smart-log", p["device"], "-o", "json"],
        "SMART / health log (RUNBOOK §2.4)",
    ),
)
