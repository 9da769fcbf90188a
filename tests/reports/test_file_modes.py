"""Signed reports are written for the service alone: 0600 files in 0700 folders."""

import stat
from pathlib import Path

from reports.services import _write_new


def test_a_report_file_is_created_0600_in_a_0700_folder(db, settings, tmp_path):
    from acceptance.models import Engagement, Organisation

    settings.REPORTS_DIR = str(tmp_path / "reports")
    organisation = Organisation.objects.create(name="Acme")
    engagement = Engagement.objects.create(name="acme-modes", customer=organisation,
                                           start_date="2026-12-01")
    path: Path = _write_new(engagement, "r.pdf", b"%PDF-1.7\n")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert path.read_bytes() == b"%PDF-1.7\n"
