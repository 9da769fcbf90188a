"""``manage.py parse_output --tool NAME FILE [--json]``: parse one tool output, print measurements.

Runs the parser registered as NAME (``runners.parsers.PARSERS``) on the bytes of FILE (``-`` for
standard input), the same pure function the service applies to stored raw output. Prints one line
per measurement, ``metric value unit {labels}`` (labels as JSON), or with ``--json`` one JSON list
of ``{"metric", "value", "unit", "labels"}`` exactly as METRICS.md shows a measurement.

Exit status 0 when the output parsed (even to no measurement); 2 with one line on stderr when it
did not (the ParseError message: tool, line, what was expected), for an unknown tool, or for a
file that cannot be read. Touches no database.
"""

import json
import sys
from pathlib import Path

from django.core.management.base import BaseCommand

from runners.parsers import PARSERS, parse_output
from runners.parsers.base import ParseError


class Command(BaseCommand):
    help = "Parse one raw tool output with a registered parser and print its measurements."
    requires_system_checks = []

    def add_arguments(self, parser):
        parser.add_argument("--tool", required=True,
                            help=f"parser name, one of: {', '.join(sorted(PARSERS))}")
        parser.add_argument("file", help="the raw output (as the tool printed it); - for stdin")
        parser.add_argument("--json", action="store_true", dest="as_json",
                            help="print a JSON list of {metric, value, unit, labels}")

    def handle(self, *args, tool, file, as_json, **options):
        parser = PARSERS.get(tool)
        if parser is None:
            self.fail(f"error: unknown tool {tool!r}; known: {', '.join(sorted(PARSERS))}")
        try:
            raw = sys.stdin.buffer.read() if file == "-" else Path(file).read_bytes()
        except OSError as error:
            self.fail(f"error: cannot read {file}: {error.strerror or error}")
        try:
            measurements = parse_output(tool, raw)
        except ParseError as error:
            self.fail(str(error))
        if as_json:
            self.stdout.write(json.dumps([m.as_json() for m in measurements]))
            return
        for m in measurements:
            self.stdout.write(f"{m.metric} {m.value!r} {m.unit} {json.dumps(m.labels)}")

    def fail(self, line: str) -> None:
        """One line on stderr, exit status 2 (not CommandError, which prints differently)."""
        self.stderr.write(" ".join(line.splitlines()), style_func=lambda text: text)
        sys.exit(2)
