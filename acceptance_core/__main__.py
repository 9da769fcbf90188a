"""``python -m acceptance_core redecide REPORT.pdf --trust VENDOR-ROOT.pem [--customer-trust
CUSTOMER-ROOT.pem]``: verify a signed report's signatures, each against its own party's roots,
and its embedded evidence; re-parse, re-derive and re-evaluate every criterion; print recorded
against recomputed per criterion and the decision.

Exit status: 0 everything matches and every signature is trusted by its party's roots; 1 a
figure, verdict or decision differs (each named); 2 the report cannot be checked (unreadable, a
signature broken, refused or not trusted, no vendor root, issued before reports carried their
criteria snapshot) — and 2 too when the evidence matches but a countersignature is present and
no customer root was given: the table is printed (the re-decision rests on the vendor's
signature alone), but 0 would tell a script that the customer's acceptance was checked when
anyone could have made that countersignature. A difference (1) outranks an unchecked
countersignature: it is a finding about the vendor-signed evidence either way.

A report that is empty, not a PDF or truncated, a missing file or a directory, and a trust file
that is not a PEM/DER certificate are each one line ``cannot check: …`` naming the file, exit 2.
Output cut short by its reader (``| head -1``) ends without a traceback, with status 141 (128 +
SIGPIPE, as ``manage.py`` and a shell tool killed by the signal end): the output was cut, so
no verdict is claimed."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from acceptance_core.pdf import (
    ReportUnreadable,
    check_signatures,
    embedded,
    load_roots,
    structure_problem,
)
from acceptance_core.redecide import CannotCheck, redecide, table


def redecide_file(data: bytes, roots: Sequence[Any], out: TextIO,
                  customer_roots: Sequence[Any] = ()) -> int:
    """Check ``data`` (a signed report), the vendor's signature against ``roots`` and a
    countersignature against ``customer_roots``; print the table; the exit status."""
    problem = structure_problem(data)
    if problem:
        print(f"cannot check: {problem}", file=out)
        return 2
    if not roots:
        print("cannot check: no trust root; pass --trust VENDOR-ROOT.pem (the vendor's CA "
              "certificate)", file=out)
        return 2
    signatures = check_signatures(data, roots, customer_roots)
    for line in signatures.lines:
        print(line, file=out)
    if not signatures.ok:
        print(f"cannot check: signature: {signatures.problem}", file=out)
        return 2
    status = redecide_evidence(data, out)
    if signatures.unchecked and status == 0:
        print(f"cannot check: {signatures.unchecked}; the decision above rests on the "
              f"vendor's signature", file=out)
        return 2
    return status


def redecide_evidence(data: bytes, out: TextIO) -> int:
    """Re-decide a report whose signatures were checked; print the table; the exit status."""
    try:
        summary, files = embedded(data)
    except ReportUnreadable as e:
        print(f"cannot check: {e}", file=out)
        return 2
    try:
        result = redecide(summary, files)
    except CannotCheck as e:
        print(f"cannot check: {e}", file=out)
        return 2
    if summary.get("simulated"):
        print("SIMULATED EVIDENCE: lab stand-ins produced this report's raw outputs", file=out)
    for note in result.notes:
        print(f"note: {note}", file=out)
    print(table(result), file=out)
    for difference in result.differences:
        print(f"DIFFERS: {difference}", file=out)
    print("result: " + ("the evidence gives the recorded decision" if not result.differences
                        else f"{len(result.differences)} difference(s)"), file=out)
    return result.exit_code


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m acceptance_core")
    commands = parser.add_subparsers(dest="command", required=True)
    check = commands.add_parser("redecide", help="re-decide a signed report from its evidence")
    check.add_argument("report", help="the signed report PDF")
    check.add_argument("--trust", action="append", default=[], metavar="ROOT.pem",
                       help="the vendor's trust root (PEM or DER); repeat for more")
    check.add_argument("--customer-trust", action="append", default=[],
                       metavar="CUSTOMER-ROOT.pem",
                       help="the customer's root or signing certificate, for their "
                            "countersignature only; repeat for more")
    args = parser.parse_args(argv)
    # pyHanko logs a whole traceback at WARNING when it cannot build a trust path (a signature
    # checked against the other party's roots); the verdict is printed here in one line instead
    logging.getLogger("pyhanko").setLevel(logging.CRITICAL)
    logging.getLogger("pyhanko_certvalidator").setLevel(logging.CRITICAL)
    try:
        status = _check(args.report, args.trust, args.customer_trust, sys.stdout)
        sys.stdout.flush()  # a reader that went away is found here, not at the exit's flush
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # later writes: nowhere
        return 141
    return status


def _check(report: str, trust: Sequence[str], customer_trust: Sequence[str], out: TextIO) -> int:
    try:
        data = Path(report).read_bytes()
        roots = load_roots(trust)
        customer_roots = load_roots(customer_trust)
    except OSError as e:
        print(f"cannot check: cannot read {report}: {e.strerror or e}", file=out)
        return 2
    except ReportUnreadable as e:
        print(f"cannot check: {e}", file=out)
        return 2
    return redecide_file(data, roots, out, customer_roots)


if __name__ == "__main__":
    sys.exit(main())
