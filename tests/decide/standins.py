"""Running the lab stand-ins as a lab node does and parsing what they print (the whole path:
stand-in → parser → derivation → evaluation), shared by the boundary tests of issue 16."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from gates.defaults import DEFAULT_GATES
from gates.evaluation import CriterionSpec, Sample
from runners.lab.scenarios import SCENARIO_ENV, STANDIN_DIR, write_scenario_file
from runners.parsers import parse_output


class StandinNode:
    """One lab node: stand-ins first on PATH, its scenario through the environment."""

    def __init__(self, tmp_path: Path, name: str, overrides: dict | None = None,
                 node: str = "gpu-1"):
        self.tmp_path, self.node = tmp_path, node
        tmp_path.mkdir(parents=True, exist_ok=True)
        self.scenario_file = write_scenario_file(tmp_path / f"{node}.json", name, overrides)
        self.env = {"PATH": f"{STANDIN_DIR}{os.pathsep}{os.environ.get('PATH', os.defpath)}",
                    "TMPDIR": str(tmp_path), "LC_ALL": "C", SCENARIO_ENV: str(self.scenario_file)}

    def run(self, tool: str, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run([str(STANDIN_DIR / tool), *args], capture_output=True,
                              timeout=60, env=self.env, cwd=self.tmp_path, check=False)

    def parsed(self, parser: str, tool: str, *args: str, first_id: int = 1,
               **labels: str) -> list[Sample]:
        done = self.run(tool, *args)
        assert done.returncode == 0, done.stderr
        return self.samples(parser, done.stdout, first_id, **labels)

    def parsed_file(self, parser: str, path: Path, first_id: int = 1,
                    **labels: str) -> list[Sample]:
        """What the stand-in saved to ``path`` (a result file), parsed."""
        return self.samples(parser, path.read_bytes(), first_id, **labels)

    def samples(self, parser: str, raw: bytes, first_id: int = 1,
                **labels: str) -> list[Sample]:
        return [Sample(first_id + i, m.metric, m.value, m.unit, {**m.labels, **labels},
                       self.node)
                for i, m in enumerate(parse_output(parser, raw))]


def default_spec(gate: str, key: str) -> CriterionSpec:
    """The default criterion ``key`` of ``gate`` (gates/defaults.py) as evaluation sees it."""
    definition = next(g for g in DEFAULT_GATES if g["code"] == gate)
    data = next(c for c in definition["criteria"] if c["key"] == key)
    kept = ("description", "source", "reference_figure", "reference_profile")
    fields = {k: v for k, v in data.items() if k not in kept}
    return CriterionSpec(**fields)


FIO_READ = ["--name=seqread", "--filename=/dev/nvme24n1", "--readonly", "--rw=read", "--bs=1M",
            "--direct=1", "--ioengine=libaio", "--iodepth=32", "--numjobs=8",
            "--offset_increment=10%", "--size=10%", "--time_based", "--runtime=60",
            "--ramp_time=10", "--group_reporting", "--output-format=json"]
