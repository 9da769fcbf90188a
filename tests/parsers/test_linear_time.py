"""Hostile captures of 10 MB, built from the worst cases of the regular expressions the parsers
used before (issue 13 item 7: 100 KB took 26.6 s), parse in linear time: under a second of CPU
on a quiet machine, and where a slow or loaded machine takes longer, four times the input takes
about four times the CPU (a quadratic pattern takes sixteen times, and hours on 10 MB). The
rewritten patterns find exactly what the old ones found on random text."""

import random
import re
import time

import pytest

from runners.parsers import fio, nic_counters, parse_output, vllm_metrics
from runners.parsers.base import ParseError, null_bare_nonfinite

TEN_MB = 10_000_000


def timed(function, *args):
    """The CPU seconds this process spent on ``function(*args)``: unlike the wall clock it does
    not grow when other processes load the machine (a quadratic pattern on 10 MB would still
    take hours)."""
    start = time.process_time()
    try:
        function(*args)
    except ParseError:
        pass  # refusing the capture is fine; taking long is not
    return time.process_time() - start


def assert_linear(function, build, *args):
    """``function(*args, build(size))`` at 10 MB takes under a second of CPU, or, on a machine too
    slow for that, at most ten seconds and under eight times what a quarter of the input takes
    (linear is four, quadratic sixteen)."""
    whole = timed(function, *args, build(TEN_MB))
    if whole < 1.0:
        return
    quarter = timed(function, *args, build(TEN_MB // 4))
    assert whole < 10.0 and whole / max(quarter, 1e-3) < 8.0, (whole, quarter)


@pytest.mark.parametrize("build", [
    # an unclosed string of escaped quotes after a bare nan: the old pattern re-read it from
    # every quote
    lambda size: b'{"a": nan, "b": "' + b'\\"' * (size // 2),
    lambda size: b'{"a": -nan}\n' + b'"' * size,
], ids=["escaped-quotes", "quotes"])
def test_it_rewrites_bare_nonfinite_tokens_of_a_hostile_capture_in_linear_time(build):
    assert_linear(parse_output, build, "fio")


def test_null_bare_nonfinite_alone_is_linear_on_the_old_worst_case():
    assert_linear(null_bare_nonfinite, lambda size: '{"a": nan, "b": "' + '\\"' * (size // 2))


@pytest.mark.parametrize("labels", [
    lambda size: "a" * size, lambda size: " " * size, lambda size: "9a" * (size // 2),
    lambda size: 'a= ' * (size // 3), lambda size: 'a="\\"' * (size // 5),
], ids=["name-run", "spaces", "digits", "no-value", "escaped"])
def test_vllm_metrics_reads_hostile_labels_in_linear_time(labels):
    assert_linear(vllm_metrics.parse,
                  lambda size: ("vllm:prefix_cache_hits_total{" + labels(size) + "} 1\n").encode())


def test_nic_counters_and_fio_read_hostile_lines_in_linear_time():
    assert_linear(nic_counters.parse, lambda size: b"a" * size + b"\n")
    assert_linear(fio.parse, lambda size: b"\n" * size + b'{"jobs": []}\n')


OLD_NONFINITE = r"-?(?:nan|inf(?:inity)?)(?![\w.])"
OLD_STRING_OR_NONFINITE = re.compile(
    r'"[^"\\]*(?:\\.[^"\\]*)*"|(?<![\w.])(' + OLD_NONFINITE + ")", re.IGNORECASE)
OLD_LABEL = re.compile(r'\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*,?')
OLD_PAIR = re.compile(r"([a-z_]+)=(\S+)")
OLD_INTERRUPTED = re.compile(r"^\s*fio: terminating on signal", re.MULTILINE)


def random_texts(pieces, count=20_000, seed=13):
    rnd = random.Random(seed)
    for _ in range(count):
        yield "".join(rnd.choice(pieces) for _ in range(rnd.randint(0, 14)))


def test_the_rewrite_finds_what_the_old_pattern_found():
    pieces = ['"', "\\", "nan", "-nan", "inf", "Infinity", "\u0131nf", "x", ".", " ", "\n", "1",
              ",", ":", "{"]
    for text in random_texts(pieces):
        old = OLD_STRING_OR_NONFINITE.sub(
            lambda m: "null" if m.group(1) else m.group(0), text)
        assert null_bare_nonfinite(text) == old, repr(text)


def test_labels_pairs_and_the_interrupted_line_match_as_before():
    pieces = ["a", "B", "9", "_", "=", '"', "\\", " ", ",", "\t", "x=", '="', "\u00a0"]
    for text in random_texts(pieces):
        assert vllm_metrics._LABEL.findall(text) == OLD_LABEL.findall(text), repr(text)
        assert nic_counters._PAIR.findall(text) == OLD_PAIR.findall(text), repr(text)
    for text in random_texts(["\n", " ", "\t", "\r", "fio: terminating on signal", "x"]):
        assert bool(fio._INTERRUPTED.search(text)) == bool(OLD_INTERRUPTED.search(text))
