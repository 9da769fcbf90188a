"""Issue 16, G4 on a real engine: vLLM's ``start_times`` are ``time.perf_counter()`` readings;
the soak agent maps them onto the window's epoch times, and the completion gap runs between
consecutive completions and from the last one to the window end (not from the window start).
Whole path: the soak-vllm stand-in's benchmark client (which now times requests as vLLM does)
against a real HTTP engine on loopback, then the agent's gap."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from runners.lab.scenarios import STANDIN_DIR
from runners.soak.node_agent import completion_gaps


class Engine(BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802 (http.server's name)
        self.rfile.read(int(self.headers["Content-Length"]))
        body = json.dumps({"choices": [{"text": "ok"}], "usage": {"completion_tokens": 4}})
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, *args):
        pass


@pytest.fixture
def engine():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Engine)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_the_standin_client_prints_perf_counter_start_times_and_the_gap_is_sane(engine,
                                                                              tmp_path):
    started, counter = time.time(), time.perf_counter()
    done = subprocess.run(
        [sys.executable, str(STANDIN_DIR / "soak-vllm"), "bench", "serve", "--base-url", engine,
         "--model", "m", "--num-prompts", "4", "--max-concurrency", "2", "--request-rate", "8",
         "--save-result", "--save-detailed", "--result-dir", str(tmp_path),
         "--result-filename", "w.json"], capture_output=True, timeout=60, check=False)
    ended = time.time()
    assert done.returncode == 0, done.stderr
    result = json.loads((tmp_path / "w.json").read_text())
    starts = result["start_times"]
    # perf_counter readings of this machine's monotonic clock, nowhere near epoch time.
    assert all(counter <= s <= counter + (ended - started) for s in starts)
    assert all(s < started - 1e6 for s in starts)
    first, last, gap = completion_gaps(result, started, ended, (started, counter))
    assert started <= first <= last <= ended
    assert 0 <= gap < ended - started < 60
    # What the agent did before: epoch window edges around perf_counter times.
    old = max(abs(started - s) for s in starts)
    assert old > 1e6


def window(starts, ttft, itls_each, errors=None):
    return {"start_times": starts, "ttfts": [ttft] * len(starts),
            "itls": [[itls_each] * 3 for _ in starts], "errors": errors or [""] * len(starts)}


COUNTER0 = 5000.0     # a perf_counter reading at the window start (node uptime, s)
EPOCH0 = 1.78e9       # the epoch time read with it


@pytest.mark.parametrize(("spacing", "verdict_gap"), [
    (59.0, 59.0), (60.0, 60.0), (61.0, 61.0)])
def test_the_gap_is_between_consecutive_completions_on_both_sides_of_60_s(spacing, verdict_gap):
    # R2-sized requests take ~76 s: the first completes 76 s into the window; then one every
    # ``spacing`` s; the window ends 10 s after the last completion.
    starts = [COUNTER0 + i * spacing for i in range(5)]
    result = window(starts, 70.0, 2.0)                 # completion = start + 76 s
    last_done = EPOCH0 + 4 * spacing + 76.0
    first, last, gap = completion_gaps(result, EPOCH0, last_done + 10.0, (EPOCH0, COUNTER0))
    assert first == pytest.approx(EPOCH0 + 76.0)
    assert last == pytest.approx(last_done)
    assert gap == pytest.approx(verdict_gap)          # not 76 s from the window start


def test_the_tail_after_the_last_completion_counts_and_failures_do_not_complete():
    starts = [COUNTER0, COUNTER0 + 10, COUNTER0 + 20]
    result = window(starts, 5.0, 1.0, errors=["", "", "HTTP 503"])
    # Completions at +8 and +18 s; the third failed; the window ends at +100 s.
    first, last, gap = completion_gaps(result, EPOCH0, EPOCH0 + 100.0, (EPOCH0, COUNTER0))
    assert (first, last) == (pytest.approx(EPOCH0 + 8), pytest.approx(EPOCH0 + 18))
    assert gap == pytest.approx(82.0)


def test_no_completion_makes_the_whole_window_the_gap():
    result = window([COUNTER0], 5.0, 1.0, errors=["timeout"])
    assert completion_gaps(result, EPOCH0, EPOCH0 + 900.0, (EPOCH0, COUNTER0)) == (
        None, None, 900.0)
