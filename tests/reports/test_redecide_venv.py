"""The auditor's set-up: a clean virtualenv (``python -m venv``) holding only the pure core's
wheel (``core/setup.py``) and pyHanko, pypdf and their dependencies — no Django, no project on
the path — re-decides a signed lab report and exits 0."""

from __future__ import annotations

import importlib.metadata as metadata
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings

from tests.reports.test_redecide import report_of
from tests.runners.test_run_gate import run_gate

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def _closure(*names: str) -> list[metadata.Distribution]:
    """The installed distributions ``names`` need (markers that exclude a requirement here
    leave it uninstalled, so a requirement not installed is skipped)."""
    seen: dict[str, metadata.Distribution] = {}
    todo = list(names)
    while todo:
        name = re.sub(r"[-_.]+", "-", todo.pop()).lower()
        if name in seen:
            continue
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        seen[name] = dist
        todo += [re.split(r"[ ;<>=!~\[(]", r, maxsplit=1)[0] for r in dist.requires or []
                 if "extra ==" not in r]
    return list(seen.values())


def _copy_installed(dists: list[metadata.Distribution], site: Path) -> None:
    for dist in dists:
        for file in dist.files or []:
            if file.parts[0] == "..":
                continue  # console scripts of the project's venv
            source = Path(str(dist.locate_file(file)))
            if source.is_file():
                (site / file).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, site / file)


def test_a_clean_virtualenv_with_only_the_pure_core_and_pyhanko_re_decides_a_report(
        lab, tmp_path):
    engagement, _ = lab("missing-drive")
    assert run_gate(engagement.name, "G1")[0] == 1
    report = tmp_path / "report.pdf"
    shutil.copy(report_of(engagement, "G1"), report)
    ca = tmp_path / "vendor-root.pem"
    shutil.copy(Path(settings.SIGNING_DIR) / "ca.pem", ca)

    wheels = tmp_path / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(wheels),
                    str(ROOT / "core")], check=True, timeout=240, cwd=tmp_path)
    venv = tmp_path / "auditor"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    site = Path(subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True, capture_output=True, text=True).stdout.strip())
    _copy_installed(_closure("pyhanko", "pypdf"), site)
    wheel = next(wheels.glob("acceptance_core-*.whl"))
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-index", "--no-deps",
                    str(wheel)], check=True, timeout=120)

    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    no_django = subprocess.run([str(python), "-c", "import django"], cwd=tmp_path, env=env,
                               capture_output=True, text=True)
    assert no_django.returncode == 1 and "No module named 'django'" in no_django.stderr
    done = subprocess.run([str(python), "-m", "acceptance_core", "redecide", str(report),
                           "--trust", str(ca)], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "decision G1: recorded stopped, recomputed stopped" in done.stdout
    assert "drive-count" in done.stdout and "NO" not in done.stdout.split()
    # the installed package is the wheel's, not the checkout's
    where = subprocess.run([str(python), "-c", "import gates.evaluation as e; print(e.__file__)"],
                           cwd=tmp_path, env=env, capture_output=True, text=True, check=True)
    assert where.stdout.startswith(str(site))
    script = venv / "bin" / "acceptance-redecide"
    assert subprocess.run([str(script), "redecide", str(report)], env=env, cwd=tmp_path,
                          capture_output=True, text=True).returncode == 2  # no trust root
