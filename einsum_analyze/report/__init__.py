"""The report: the results of one analysis as data, and what is done with saved ones.

:mod:`.report` holds :class:`Report`, its JSON form and the one JSON writer; the schema
lies beside the package in ``einsum_analyze/schema/``. :mod:`.budgets` checks a report's
figures against a user's limits (CI mode), :mod:`.cases` reads a cases file into cases
and holds a batch's document, :mod:`.compare` compares two saved reports figure by
figure (:mod:`.changes` holds one compared figure, :mod:`.compare_times` judges the
runs' times as ratios to the torch baseline), and :mod:`.saved` reads saved reports of
any schema version.

Everything here is data in, data out: it may import the model, the strategies, the
search, the roofline and the backends' records (:class:`~einsum_analyze.backends.base.Run`),
never torch, click or rich. Running an analysis or a case is the entry points' work
(:mod:`einsum_analyze.analysis`).
"""

from __future__ import annotations

from .report import SCHEMA_VERSION, BudgetCheck, Report, dump_json, environment, load_schema

__all__ = ["SCHEMA_VERSION", "BudgetCheck", "Report", "dump_json", "environment", "load_schema"]
