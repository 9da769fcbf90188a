"""fio parser: the figures stay exactly what the main branch's parser read before its json+
``bins`` merge was made faster (issue 17, "parsing a 50 MB fio json+ capture").

``data/fio_pinned.json`` holds what the parser of main at e559d2e returned for every fio file of
``../shared/corpus`` and for a real json+ capture (``data/fio-3.33-json-plus-randrw-4jobs.json.gz``:
fio-3.33 ``--output-format=json+ --rw=randrw --numjobs=4`` without ``group_reporting``, the run
``benchmarks/parse_fio.py`` makes) replicated the way that benchmark replicates it, up to its
50 MB: every metric, value (exact float equality), unit and label, or the same ParseError message.
Regenerate it only with a parser whose figures are meant to change (and bump PARSER_VERSION).
"""

import gzip
import json
import random
from pathlib import Path

import pytest

from runners.parsers import fio
from runners.parsers.base import ParseError, as_number
from tests.parsers.corpus import CORPUS, needs_corpus

DATA = Path(__file__).resolve().parent / "data"
FIXTURE = DATA / "fio-3.33-json-plus-randrw-4jobs.json.gz"
PINNED = json.loads((DATA / "fio_pinned.json").read_text())
CORPUS_FIO = CORPUS / "fio"
SIZES = (1, 2_000_000, 50_000_000)


def result_of(parse, raw):
    """What a parser made of ``raw``, as JSON data: measurements or the ParseError message."""
    try:
        measurements = parse(raw)
    except ParseError as error:
        return {"error": str(error)}
    return [[m.metric, m.value, m.unit, m.labels] for m in measurements]


def replicated(text, size):
    """``text`` with the elements of its ``jobs`` array repeated until it is ``size`` bytes
    (benchmarks/parse_fio.py's ``replicate``: the job objects exactly as fio wrote them)."""
    opening = text.index("[", text.index('"jobs"'))
    _, closing = json.JSONDecoder().raw_decode(text, opening)
    entries = text[opening + 1:closing - 1].strip()
    copies = max(1, -(-(size - len(text)) // (len(entries) + 6)))
    body = ",\n    ".join([entries] * copies)
    return (text[:opening + 1] + "\n    " + body + "\n  " + text[closing - 1:]).encode()


@needs_corpus
@pytest.mark.corpus
def test_the_pins_cover_every_fio_file_of_the_corpus():
    pinned = {name for name in PINNED if not name.startswith(FIXTURE.name)}
    assert pinned == {path.name for path in CORPUS_FIO.iterdir()}


@needs_corpus
@pytest.mark.corpus
@pytest.mark.parametrize("name", sorted(n for n in PINNED if not n.startswith(FIXTURE.name)))
def test_each_corpus_file_reads_as_pinned(name):
    assert result_of(fio.parse, (CORPUS_FIO / name).read_bytes()) == PINNED[name]


@pytest.mark.parametrize("size", SIZES)
def test_the_replicated_json_plus_capture_reads_as_pinned(size):
    raw = replicated(gzip.decompress(FIXTURE.read_bytes()).decode(), size)
    result = result_of(fio.parse, raw)
    assert result == PINNED[f"{FIXTURE.name} replicated to {size} B"]
    assert {"read_clat_p50", "read_clat_p99", "write_clat_p99"} <= {row[0] for row in result}


def test_the_pins_are_figures_a_merge_of_bins_gives():
    """The pins are no placeholders: the 4-entry capture's p99 is a latency of its bins."""
    document = json.loads(gzip.decompress(FIXTURE.read_bytes()))
    bins = {int(key) / 1e9 for job in document["jobs"] for key in job["read"]["clat_ns"]["bins"]}
    figures = {row[0]: row[1] for row in PINNED[f"{FIXTURE.name} replicated to 1 B"]}
    assert figures["read_clat_p99"] in bins
    assert figures["read_clat_p99"] > figures["read_clat_p50"] > 0


def merge_bins_one_by_one(histograms):
    """The merge as main wrote it, kept as the oracle: counts summed per key string in
    document order, each key then converted once; strictly per bin when a count is no number."""
    units = {per_second for _, per_second in histograms}
    by_key = {}
    if len(units) == 1:
        try:
            for bins, _ in histograms:
                for key, count in (bins or {}).items():
                    by_key[key] = by_key.get(key, 0) + count
        except TypeError:
            by_key = {}
    if not by_key:
        merged = {}
        for bins, per_second in histograms:
            for key, count in (bins or {}).items():
                at = (as_number("fio", "bins", key) or 0.0) / per_second
                merged[at] = merged.get(at, 0.0) + (as_number("fio", "bins", count) or 0.0)
        return merged
    per_second = units.pop()
    merged = {}
    for key, count in by_key.items():
        at = (as_number("fio", "bins", key) or 0.0) / per_second
        merged[at] = merged.get(at, 0.0) + (as_number("fio", "bins", count) or 0.0)
    return merged


def random_histograms(rng):
    keys = [str(rng.choice([rng.randint(0, 5000), rng.randint(0, 10**12)])) for _ in range(40)]
    keys += ["1.5e3", "0x10", "1500", " 7 ", "nan", "inf"]
    counts = [lambda: rng.randint(0, 10**6), lambda: rng.random() * 1e3, lambda: 2**70,
              lambda: str(rng.randint(0, 99)), lambda: True, lambda: None, lambda: 1e308]
    weights = [60, 10, 2, 3, 1, 1, 1]
    histograms = []
    for _ in range(rng.randint(2, 6)):
        size = rng.randint(0, 30)
        bins = {rng.choice(keys): rng.choices(counts, weights)[0]() for _ in range(size)}
        histograms.append((bins or rng.choice([None, {}]), rng.choice([1e9, 1e9, 1e6])))
    return histograms


def test_the_merge_sums_exactly_as_one_bin_at_a_time():
    """Random histograms with ints, floats, huge ints, numeric strings, booleans, nulls, keys in
    any numeric spelling and mixed units: the same sums (same order of additions, so the same
    floats), the same keys in the same order, and the same error when a bin is no number."""
    rng = random.Random(17)
    for _ in range(3000):
        histograms = random_histograms(rng)
        try:
            expected = merge_bins_one_by_one(histograms)
        except ParseError as error:
            with pytest.raises(ParseError) as raised:
                fio._merge_bins(histograms, "")
            assert str(raised.value) == str(error)
            continue
        merged = fio._merge_bins(histograms, "")
        assert list(merged.items()) == list(expected.items())


def at_percent_one_by_one(percentiles, percent):
    """main's lookup, kept as the oracle: the first key that reads as ``percent``."""
    for key, value in percentiles.items():
        try:
            at = float(key)
        except ValueError:
            continue
        if abs(at - percent) < 1e-9:
            return as_number("fio", key, value)
    return None


def test_percentile_keys_are_matched_as_main_matched_them():
    """Keys in any numeric spelling, ``"0.00"`` padding, words, near misses, values of every
    kind (a value that is no number is refused for the percent that reads it, as before)."""
    rng = random.Random(21)
    spellings = ["99.000000", "99.00", "99", "9.9e1", " 99 ", "50.000000", "50.00", "5e1",
                 "0.00", "99.000000001", "98.999999999999", "nan", "p99", "1_0", "50.0000000001"]
    values = [lambda: rng.randint(0, 10**7), lambda: rng.random(), lambda: "123", lambda: None,
              lambda: "fast", lambda: True, lambda: 0]
    for _ in range(3000):
        blocks = [{rng.choice(spellings): rng.choice(values)() for _ in range(rng.randint(0, 8))}
                  for _ in range(rng.randint(1, 4))]
        percents = rng.choice([[50.0, 99.0], [99.0], [99.0, 50.0]])
        matches = {}
        for block in blocks:
            try:
                expected = {p: at_percent_one_by_one(block, p) for p in percents}
            except ParseError as error:
                with pytest.raises(ParseError) as raised:
                    fio._at_percents(block, percents, matches, "")
                assert str(raised.value) == str(error)
                continue
            assert fio._at_percents(block, percents, matches, "") == expected
