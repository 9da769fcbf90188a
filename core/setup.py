"""``acceptance-core``: the pure core as a package an auditor installs without Django, a
database or the service — the parsers, probe definitions, gate evaluation and derivations, the
units, and the verifier ``python -m acceptance_core redecide REPORT.pdf`` (ARCHITECTURE.md,
README "Re-deciding a report offline").

The modules are copied from the project tree at build time (nothing is duplicated in the
repository); the packages they sit in get an empty ``__init__`` (the project's own
``acceptance/__init__`` loads Celery). Build: ``pip wheel --no-deps --no-build-isolation core
-w dist`` from the checkout."""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent.parent
WHOLE = ("acceptance_core", "runners/parsers", "runners/probes")  # every module of these
PARTS = {"gates": ("evaluation.py", "derivations.py", "soak_derivations.py"),
         "acceptance": ("units.py",), "runners": ()}
STUB = '"""Only the pure core of this package is installed here (acceptance-core)."""\n'


class CoreBuild(build_py):
    def run(self) -> None:
        out = Path(self.build_lib)
        for package in WHOLE:
            target = out / package
            target.mkdir(parents=True, exist_ok=True)
            for module in sorted((ROOT / package).glob("*.py")):
                shutil.copy2(module, target / module.name)
        for package, modules in PARTS.items():
            target = out / package
            target.mkdir(parents=True, exist_ok=True)
            (target / "__init__.py").write_text(STUB)
            for name in modules:
                shutil.copy2(ROOT / package / name, target / name)


class CoreDistribution(Distribution):
    def has_pure_modules(self) -> bool:
        return True  # the modules come from CoreBuild, not from a package list


setup(
    distclass=CoreDistribution,
    name="acceptance-core",
    version="1.0",
    description="Re-decide an acceptance gate from its signed report alone",
    python_requires=">=3.11",
    packages=[],
    cmdclass={"build_py": CoreBuild},
    install_requires=["pyHanko>=0.38,<0.39", "pyhanko-certvalidator>=0.33,<0.34", "pypdf>=5"],
    entry_points={"console_scripts": ["acceptance-redecide=acceptance_core.__main__:main"]},
)
