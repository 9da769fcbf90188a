"""Steady-state figures of a soak: the pure function lives in the pure core,
``gates.soak_derivations`` (spans, baselines, gaps, error rate, TTFT p99, throughput,
correctness answers; the soak's duration and missed fault windows), so that the service's G4
decision and the auditor's verifier (``acceptance_core redecide``) compute the same figures.
The driver's tick keeps them up to date with ``gates.soak_live`` (each window and answer
folded in once; the same figures). This module gives the soak its names.
"""

from __future__ import annotations

from gates.soak_derivations import (
    CHECKS,
    WINDOW_METRICS,
    Answer,
    Fault,
    FaultOutcome,
    Row,
    SpanFigure,
    Window,
    answers_of,
    baseline,
    decision_figures,
    derive,
    span_figures,
    spans,
    windows_of,
)
from gates.soak_live import LiveSpans
from runners.parsers.soak_correctness import divergence

__all__ = ["CHECKS", "WINDOW_METRICS", "Answer", "Fault", "FaultOutcome", "LiveSpans", "Row",
           "SpanFigure", "Window", "answers_of", "baseline", "decision_figures", "derive",
           "divergence", "span_figures", "spans", "windows_of"]
