"""Where the real tool outputs live (``../shared/corpus`` beside the clone; third-party files,
read in place, never copied) and small helpers the parser tests share."""

from pathlib import Path

import pytest

CORPUS = Path(__file__).resolve().parents[3] / "shared" / "corpus"
needs_corpus = pytest.mark.skipif(not CORPUS.exists(), reason="../shared/corpus is not present")


def by_metric(measurements):
    """Measurements keyed by metric, asserting there is one of each."""
    result = {m.metric: m for m in measurements}
    assert len(result) == len(measurements), "one measurement per metric expected"
    return result
