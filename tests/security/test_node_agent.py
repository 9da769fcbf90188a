"""The soak's node agent opens http(s) URLs only (urlopen would open file: and ftp: too)."""

import subprocess
import sys
from pathlib import Path

AGENT = Path(__file__).resolve().parents[2] / "runners" / "soak" / "node_agent.py"
REQUIRED = ["--dir", "/nonexistent", "--model", "m", "--tokenizer", "t", "--rate", "1",
            "--concurrency", "1", "--window-s", "1", "--windows", "1", "--duration-s", "1",
            "--deadline", "1", "--probe-every", "1", "--prompts-json", "[]", "--golden"]


def test_the_agent_refuses_a_base_url_that_is_not_http():
    done = subprocess.run([sys.executable, str(AGENT), "--base-url", "file:///etc/shadow",
                           *REQUIRED], capture_output=True, text=True, timeout=30)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1].endswith(
        "--base-url must be an http(s) URL, not 'file:///etc/shadow'")
    assert "Traceback" not in done.stderr
