#!/usr/bin/env python
"""Django's command-line utility for the acceptance service."""

import os
import sys

if __name__ == "__main__":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "acceptance.settings")
    from django.core.management import execute_from_command_line

    try:
        execute_from_command_line(sys.argv)
    except BrokenPipeError:
        # The reader went away (``manage.py verify_report … | head -1``): what it read stands;
        # no traceback. Later writes go nowhere, and the exit status says output was cut (141 =
        # 128 + SIGPIPE, as a shell tool killed by the signal ends).
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        sys.exit(141)
