"""The auditor's verifier: re-decide a gate from a signed report alone (``python -m
acceptance_core redecide REPORT.pdf``). It imports only the pure core (parsers, evaluation,
derivations), pyHanko and pypdf: no Django, no database, no network."""
