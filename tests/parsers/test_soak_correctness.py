"""Soak correctness rounds (``probes.jsonl`` and ``--golden`` of the node agent): one line per
round, each answer's text or why there is none."""

import pytest

from runners.parsers import soak_correctness
from runners.parsers.base import ParseError
from runners.parsers.soak_correctness import CorrectnessRound, PromptAnswer

GOLDEN = (b'{"soak_round": 0, "t": 1764590390.5, "answers": [{"id": "p1", "text": " Paris.", '
          b'"error": null, "elapsed_s": 0.21}, {"id": "p2", "text": " 42", "error": null, '
          b'"elapsed_s": 0.19}]}\n')

ROUNDS = (
    b'{"soak_round":1,"t":1764590410.25,"answers":[{"id":"p1","text":" Paris.","error":null},'
    b'{"id":"p2","text":null,"error":"TimeoutError: timed out"}]}\n'
    b'{"soak_round":2,"t":1764590420.0,"answers":[]}\n'
)


def test_it_reads_the_known_good_round():
    assert soak_correctness.parse(GOLDEN) == [CorrectnessRound(
        line=1, number=0, at=1764590390.5,
        answers=(PromptAnswer("p1", " Paris.", ""), PromptAnswer("p2", " 42", "")))]


def test_it_reads_rounds_with_an_answer_that_failed():
    first, second = soak_correctness.parse(ROUNDS)
    assert (first.line, first.number, first.at) == (1, 1, 1764590410.25)
    assert first.answers == (PromptAnswer("p1", " Paris.", ""),
                             PromptAnswer("p2", None, "TimeoutError: timed out"))
    assert (second.line, second.number, second.answers) == (2, 2, ())
    assert soak_correctness.TOOL == "soak_correctness"
    assert soak_correctness.PARSER_VERSION == "1"


@pytest.mark.parametrize(("line", "expected"), [
    (b'{"soak_round":3,"t":1.0,"answers":[', "a JSON object"),
    (b'{"soak_round":3,"answers":[]}', "the key 't'"),
    (b'{"soak_round":3,"t":"later","answers":[]}', "a number for 't'"),
    (b'{"soak_round":3,"t":1.0}', "a list for 'answers'"),
    (b'{"soak_round":3,"t":1.0,"answers":["p1"]}', "an answer object"),
    (b'{"soak_round":3,"t":1.0,"answers":[{"text":"x"}]}', "a prompt id"),
    (b'{"soak_round":3,"t":1.0,"answers":[{"id":"p1","text":7}]}', "a text or null"),
])
def test_it_names_the_line_it_cannot_read(line, expected):
    with pytest.raises(ParseError) as error:
        soak_correctness.parse(ROUNDS + line + b"\n")
    assert (error.value.tool, error.value.line) == ("soak_correctness", 3)
    assert expected in error.value.expected
