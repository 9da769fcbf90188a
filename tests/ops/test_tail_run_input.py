"""``tail_run`` answers bad input with exit status 2 and one line: an offset outside a file
offset's range (a 20-digit offset printed a traceback from ``seek``), or an unknown run."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command


def tail_run(*args):
    out, err = io.StringIO(), io.StringIO()
    with pytest.raises(SystemExit) as exit_info:
        call_command("tail_run", *args, stdout=out, stderr=err)
    return exit_info.value.code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("offset", ["99999999999999999999", "9223372036854775808", "-5"])
def test_an_offset_outside_a_files_range_is_refused_in_one_line(db, offset):
    code, out, err = tail_run("1", "--offset", offset)
    assert (code, out) == (2, "")
    assert err == "error: --offset must be 0 … 9223372036854775807 (a byte offset)\n"


def test_an_unknown_probe_run_is_named(db):
    assert tail_run("424242", "--offset", "9223372036854775807") == (
        2, "", "error: no probe run with id 424242\n")
