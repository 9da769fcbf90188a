"""The G4 soak agent's correctness rounds (``probes.jsonl`` and ``--golden``, RUNBOOK §5.2) →
typed round records.

The node agent replays fixed prompts at temperature 0 and writes one JSON line per round:
``{"soak_round": N, "t": node epoch seconds, "answers": [{"id", "text", "error", ...}]}``
(``text`` null and ``error`` set when the prompt got no answer). ``--golden`` prints the same
record (round 0) on stdout: the known-good answers taken before the soak.

Not in :data:`runners.parsers.PARSERS`: a round is judged against the known-good answers of
its node, which are not in the raw bytes, so :func:`parse` returns :class:`CorrectnessRound`
objects; the soak (``runners.soak.collection``) computes the mismatches and stores them. Blank
lines are skipped; a line that is not a JSON object, lacks a key or has a wrong type raises
ParseError naming that line.
"""

from __future__ import annotations

from dataclasses import dataclass

from runners.parsers.base import ParseError
from runners.parsers.soak_windows import json_object, number_at

TOOL = "soak_correctness"
PARSER_VERSION = "1"


@dataclass(frozen=True)
class PromptAnswer:
    """One prompt's answer in a round: its text, or why there is none."""

    prompt: str
    text: str | None
    error: str  # "" when answered


@dataclass(frozen=True)
class CorrectnessRound:
    """One correctness round of one node (``at`` in node epoch seconds)."""

    line: int  # 1-based line of the raw bytes it was read from
    number: int
    at: float
    answers: tuple[PromptAnswer, ...]


def parse(raw: bytes) -> list[CorrectnessRound]:
    """Every round in ``raw`` (a range of ``probes.jsonl``, or the ``--golden`` output)."""
    rounds = []
    for number, line in enumerate(raw.decode("utf-8", errors="replace").split("\n"), start=1):
        if line.strip():
            rounds.append(_round(number, line))
    return rounds


def _round(number: int, line: str) -> CorrectnessRound:
    record = json_object(TOOL, number, line)
    index = number_at(TOOL, number, record, "soak_round")
    if index != int(index) or index < 0:
        raise ParseError(TOOL, number, "a round number for 'soak_round'", repr(index))
    at = number_at(TOOL, number, record, "t")
    answers = record.get("answers")
    if not isinstance(answers, list):
        raise ParseError(TOOL, number, "a list for 'answers'", repr(answers))
    return CorrectnessRound(line=number, number=int(index), at=at,
                            answers=tuple(_answer(number, answer) for answer in answers))


def _answer(number: int, answer: object) -> PromptAnswer:
    if not isinstance(answer, dict):
        raise ParseError(TOOL, number, "an answer object in 'answers'", repr(answer))
    prompt, text, error = answer.get("id"), answer.get("text"), answer.get("error")
    if not isinstance(prompt, str) or not prompt:
        raise ParseError(TOOL, number, "a prompt id for 'id'", repr(prompt))
    if text is not None and not isinstance(text, str):
        raise ParseError(TOOL, number, f"a text or null for prompt {prompt}", repr(text))
    return PromptAnswer(prompt=prompt, text=text, error=str(error) if error else "")
