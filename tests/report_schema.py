"""The report and comparison schemas' validators, built once for the whole test run.

``jsonschema.validate(document, schema)`` checks the schema itself on every call (about
90 ms for the report's); a validator built once checks only the document (about 2 ms).
"""

from __future__ import annotations

import functools
from typing import Any

import jsonschema

from einsum_analyze.report.report import load_schema

__all__ = ["validate_comparison", "validate_report"]


@functools.cache
def _validator(which: str) -> jsonschema.Draft202012Validator:
    if which == "report":
        schema = load_schema()
    else:
        from einsum_analyze.report.saved import load_comparison_schema

        schema = load_comparison_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def validate_report(document: Any) -> None:
    """Raise ``jsonschema.ValidationError`` unless ``document`` is a valid report."""
    _validator("report").validate(document)


def validate_comparison(document: Any) -> None:
    """Raise ``jsonschema.ValidationError`` unless ``document`` is a valid comparison."""
    _validator("comparison").validate(document)
