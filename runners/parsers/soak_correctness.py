"""The G4 soak agent's correctness rounds (``probes.jsonl`` and ``--golden``, RUNBOOK §5.2) →
typed round records.

The node agent replays fixed prompts at temperature 0 and writes one JSON line per round:
``{"soak_round": N, "t": node epoch seconds, "answers": [{"id", "text", "error", ...}]}``
(``text`` null and ``error`` set when the prompt got no answer). ``--golden`` prints the same
record (round 0) on stdout: the known-good answers taken before the soak.

Not in :data:`runners.parsers.PARSERS`: a round is judged against the known-good answers of
its node, which are not in the raw bytes, so :func:`parse` returns :class:`CorrectnessRound`
objects; :func:`mismatches` judges a round against the known-good answers (the soak's
collection stores them; the auditor's verifier computes them again). Blank lines are skipped;
a line that is not a JSON object, lacks a key or has a wrong type raises ParseError naming that
line.
"""

from __future__ import annotations

from dataclasses import dataclass

from runners.parsers.base import MeasurementData, ParseError
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


def golden_answers(round_: CorrectnessRound) -> dict[str, str]:
    """The known-good answers of a ``--golden`` round, by prompt."""
    return {a.prompt: a.text or "" for a in round_.answers}


def divergence(golden: str, answer: str | None) -> tuple[float, str]:
    """(mismatch 0|1, ``exact`` / ``diverges at token k``) — RUNBOOK §5.2, whitespace tokens."""
    if answer is None:
        return 1.0, "no answer"
    if answer == golden:
        return 0.0, "exact"
    a, b = golden.split(), answer.split()
    k = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a),
                                                                                    len(b)))
    return 1.0, f"diverges at token {k}"


def mismatches(round_: CorrectnessRound, golden: dict[str, str]) -> list[MeasurementData]:
    """One ``probe_mismatches`` figure per answer of ``round_``: its divergence from the
    known-good answer, 1 for an answer that failed or has no known-good one."""
    rows = []
    for answer in round_.answers:
        known = golden.get(answer.prompt)
        if answer.error or known is None:
            value, said = 1.0, f"error: {answer.error or 'no known-good answer'}"
        else:
            value, said = divergence(known, answer.text)
        rows.append(MeasurementData("probe_mismatches", value, "1", {
            "prompt": answer.prompt, "result": said[:120], "soak_round": str(round_.number)}))
    return rows
