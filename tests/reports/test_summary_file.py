"""``summary.json`` written piece by piece is byte for byte what ``json.dumps`` writes (compact,
ASCII): long lists item by item, short ones and dicts walked, the rest whole."""

import json

from reports.summary_file import LONG, summary_file


def test_the_pieces_make_the_same_bytes_as_json_dumps():
    summary = {
        "runs": [{"number": i, "node": "gpu-ü÷–", "value": 1.5e-7 * i, "range": [i, 3],
                  "labels": {}, "none": None, "ok": i % 2 == 0} for i in range(LONG + 5)],
        "gates": [{"redecide": {"runs": [{"measurements": [{"metric": "m", "value": 0.1}]}]
                                * (LONG + 1), "soak": {}}, "criteria": []}],
        "mixed keys": {1: "one", "two": 2.0},  # json.dumps turns 1 into "1": written whole
        "text": "a \"quoted\" \\ line\n with 😀",
        "nan": float("nan"),
    }
    written = summary_file(summary).read()
    assert written == json.dumps(summary, ensure_ascii=True, separators=(",", ":")).encode()
    assert written.isascii() and json.loads(written)["runs"][3]["node"] == "gpu-ü÷–"
