"""Hypothesis budgets: what a property test asks for, within the loaded profile's.

A test that states ``max_examples`` overrides the profile, so the default run would pay
for its full budget and ``--hypothesis-profile=thorough`` would never raise it. Through
:func:`examples` the default and CI runs draw at most the profile's budget (20 and 30,
tests/conftest.py), and the thorough profile draws its own (1000) everywhere.
"""

from __future__ import annotations

from hypothesis import settings

THOROUGH = 1000
"""The thorough profile's budget (tests/conftest.py): from it on, the profile decides."""


def examples(wanted: int) -> int:
    """``max_examples`` for a test that asks for ``wanted`` under the loaded profile.

    Example:
        >>> examples(5) <= 5
        True
    """
    budget = settings.default.max_examples
    return budget if budget >= THOROUGH else min(wanted, budget)
