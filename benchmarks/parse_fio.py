"""Parsing a ~50 MB fio json+ capture: our ``fio`` parser vs ``json.loads`` of the same bytes.

Figures (TARGETS.md): parse time, anchor ``json.loads`` time, target ≤ 1.5× (also printed in CPU
seconds of the same runs, steadier on a shared machine); peak memory of our parse (tracemalloc,
allocations made during the parse), anchor the capture's size, target ≤ 3×.
Prints one JSON line per figure: ``{"name", "value", "unit", "anchor", "ratio"}``, times as
medians of ``--runs`` runs, the two timings interleaved.

The capture: real fio (``--output-format=json+``, ``rw=randrw``, ``numjobs=4`` without
``group_reporting``, psync on a scratch file, 2 s) gives four job entries with read and write
``bins`` histograms; the exact text of its ``jobs`` array elements is then repeated, unchanged,
until the document reaches ``--size`` MB (one valid fio document with ~1 300 job entries, so the
parser sums them and merges ~1.6 million bins). Needs ``fio`` on PATH.

Run: ``.venv/bin/python benchmarks/parse_fio.py [--runs 5] [--size 50] [--keep FILE]``
(``--capture FILE`` reads a kept capture instead of running fio). The machine
is shared: stderr names each run's two times and the load average beside the figure.
"""

import argparse
import gc
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from runners.parsers import fio  # noqa: E402

TIME_TARGET = 1.5
MEMORY_TARGET = 3.0


def real_fio_json_plus(directory: Path) -> str:
    """One short real fio run printing json+ (four job entries, read and write histograms)."""
    completed = subprocess.run(
        ["fio", "--name=bench", f"--filename={directory / 'scratch.bin'}", "--rw=randrw",
         "--bs=4k", "--size=64M", "--ioengine=psync", "--numjobs=4", "--time_based",
         "--runtime=2", "--output-format=json+"],
        capture_output=True, cwd=directory, timeout=120, check=True,
    )
    return completed.stdout.decode()


def replicate(text: str, size: int) -> bytes:
    """``text`` with the elements of its ``jobs`` array repeated until it is ``size`` bytes."""
    opening = text.index("[", text.index('"jobs"'))
    _, closing = json.JSONDecoder().raw_decode(text, opening)  # index just past "]"
    entries = text[opening + 1:closing - 1].strip()  # the job objects, exactly as fio wrote them
    copies = max(1, -(-(size - len(text)) // (len(entries) + 6)))
    body = ",\n    ".join([entries] * copies)
    document = text[:opening + 1] + "\n    " + body + "\n  " + text[closing - 1:]
    json.loads(document)  # still one valid document
    return document.encode()


def timed(function, raw: bytes) -> tuple[float, float]:
    """Wall-clock and CPU seconds of one call (the result freed outside the timing)."""
    gc.collect()
    start, cpu_start = time.perf_counter(), time.process_time()
    result = function(raw)
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    del result
    return elapsed, cpu


def peak_bytes(function, raw: bytes) -> int:
    gc.collect()
    tracemalloc.start()
    try:
        result = function(raw)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    del result
    return peak


def figure(name: str, value: float, unit: str, anchor: float, target: float) -> dict:
    ratio = value / anchor
    line = {"name": name, "value": round(value, 4), "unit": unit, "anchor": round(anchor, 4),
            "ratio": round(ratio, 3)}
    print(json.dumps(line), flush=True)
    if ratio > target:
        print(f"MISSED: {name} is {ratio:.2f}x, target <= {target}x "
              f"({(ratio / target - 1) * 100:.0f} % over)", file=sys.stderr)
    return line


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--size", type=float, default=50.0, help="capture size in MB (1e6 B)")
    parser.add_argument("--keep", type=Path, help="also write the capture to this file")
    parser.add_argument("--capture", type=Path,
                        help="read a capture kept with --keep instead of running fio (the same "
                             "bytes for two versions of the parser)")
    args = parser.parse_args()
    if args.capture:
        try:
            raw = args.capture.read_bytes()
        except OSError as error:
            sys.exit(f"parse_fio: cannot read the capture {args.capture}: {error.strerror}")
    elif shutil.which("fio") is None:
        sys.exit("parse_fio: fio is not installed (apt-get install fio)")
    else:
        with tempfile.TemporaryDirectory(prefix="bench-fio-") as scratch:
            raw = replicate(real_fio_json_plus(Path(scratch)), int(args.size * 1e6))
    if args.keep:
        args.keep.write_bytes(raw)
    jobs = len(json.loads(raw)["jobs"])
    source = args.capture or "real fio json+, replicated"
    print(f"capture: {len(raw)} bytes, {jobs} job entries ({source})", file=sys.stderr)

    measurements = fio.parse(raw)  # warm up, and check it reads the capture
    assert any(m.metric == "read_clat_p99" for m in measurements)
    json.loads(raw)

    ours, anchor = [], []
    for _ in range(args.runs):
        ours.append(timed(fio.parse, raw))
        anchor.append(timed(json.loads, raw))
    figure("fio_json_plus_parse_time", statistics.median(t for t, _ in ours), "s",
           statistics.median(t for t, _ in anchor), TIME_TARGET)
    # The same runs in CPU seconds: less swayed by the other processes of a shared machine (the
    # target is the wall-clock figure above).
    figure("fio_json_plus_parse_cpu_time", statistics.median(c for _, c in ours), "s",
           statistics.median(c for _, c in anchor), TIME_TARGET)
    print(f"runs (s), ours {[round(t, 3) for t, _ in ours]}, json.loads "
          f"{[round(t, 3) for t, _ in anchor]}; load average {os.getloadavg()[0]:.1f}",
          file=sys.stderr)
    figure("fio_json_plus_parse_peak_memory", float(peak_bytes(fio.parse, raw)), "B",
           float(len(raw)), MEMORY_TARGET)


if __name__ == "__main__":
    main()
