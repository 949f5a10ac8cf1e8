"""Gradient derivation (docs/method.md section 4), checked by hand on tiny equations.

For ``Y = einsum(s_1, ..., s_n -> o)`` the gradient of operand ``k`` is the core
contraction ``o, s_j (j != k) -> t_k``, then a broadcast along the labels of ``s_k``
found nowhere else, then a diagonal embedding where ``s_k`` repeats a label.
"""

from __future__ import annotations

import pytest

from einsum_analyze import parse_equation
from einsum_analyze.model.equation import Equation
from einsum_analyze.model.gradients import (
    UPSTREAM,
    GradientSpec,
    derive_gradient,
    derive_gradients,
    unreduce_kind,
)


def spec_of(text: str, shapes, operand: int) -> GradientSpec:
    return derive_gradient(parse_equation(text, shapes), operand)


def summary(spec: GradientSpec) -> tuple:
    """(core equation, core sources, broadcast labels, has_diagonal, unreduce kind,
    core elements, gradient elements)."""
    return (
        spec.core_equation,
        spec.core_sources,
        spec.broadcast,
        spec.has_diagonal,
        spec.unreduce,
        spec.core_elements,
        spec.elements,
    )


# --- hand-checked specs ----------------------------------------------------------------------

# (equation, shapes, operand, expected summary)
HAND = [
    # ijj,k->ik: operand 0 keeps i (in the output), j is found nowhere else and is a
    # diagonal: core ik,k->i, broadcast along j, embedded on the jj diagonal.
    ("ijj,k->ik", [(2, 3, 3), (4,)], 0, ("ik,k->i", (UPSTREAM, 1), "j", True, "embed", 2, 18)),
    # Operand 1 reads the diagonal of operand 0: ik,ijj->k, nothing to broadcast.
    ("ijj,k->ik", [(2, 3, 3), (4,)], 1, ("ik,ijj->k", (UPSTREAM, 0), "", False, "none", 4, 4)),
    # A trace: the core is the scalar upstream alone; i is broadcast and embedded.
    ("ii->", [(3, 3)], 0, ("->", (UPSTREAM,), "i", True, "embed", 1, 9)),
    # The diagonal: nothing broadcast, but the result is embedded on the diagonal.
    ("ii->i", [(3, 3)], 0, ("i->i", (UPSTREAM,), "", True, "embed", 3, 9)),
    # Matrix product: the swap rule, nothing else.
    ("ij,jk->ik", [(2, 3), (3, 4)], 0, ("ik,jk->ij", (UPSTREAM, 1), "", False, "none", 6, 6)),
    ("ij,jk->ik", [(2, 3), (3, 4)], 1, ("ik,ij->jk", (UPSTREAM, 0), "", False, "none", 12, 12)),
    # Private labels on both sides: each core is a scalar, broadcast to the operand.
    ("ab,c->", [(2, 3), (4,)], 0, (",c->", (UPSTREAM, 1), "ab", False, "view", 1, 6)),
    ("ab,c->", [(2, 3), (4,)], 1, (",ab->", (UPSTREAM, 0), "c", False, "view", 1, 4)),
    # Three operands: every core is a three-input einsum (it needs its own path).
    ("i,j,ij->", [(3,), (4,), (3, 4)], 0,
     (",j,ij->i", (UPSTREAM, 1, 2), "", False, "none", 3, 3)),
    ("i,j,ij->", [(3,), (4,), (3, 4)], 1,
     (",i,ij->j", (UPSTREAM, 0, 2), "", False, "none", 4, 4)),
    ("i,j,ij->", [(3,), (4,), (3, 4)], 2,
     (",i,j->ij", (UPSTREAM, 0, 1), "", False, "none", 12, 12)),
    # A scalar operand: its gradient is a full contraction to a scalar.
    (",i->i", [(), (3,)], 0, ("i,i->", (UPSTREAM, 1), "", False, "none", 1, 1)),
    (",i->i", [(), (3,)], 1, ("i,->i", (UPSTREAM, 0), "", False, "none", 3, 3)),
]


@pytest.mark.parametrize(
    ("text", "shapes", "operand", "expected"),
    HAND,
    ids=[f"{text}[{operand}]" for text, _, operand, _ in HAND],
)
def test_hand_checked_spec(text, shapes, operand, expected):
    spec = spec_of(text, shapes, operand)
    assert summary(spec) == expected
    assert spec.operand == operand
    assert spec.term == parse_equation(text, shapes).terms[operand]


def test_core_terms_are_output_then_the_other_operands_in_order():
    spec = spec_of("i,j,ij->", [(3,), (4,), (3, 4)], 1)
    assert spec.core_terms == ("", "i", "ij")
    assert spec.core_output == "j"


def test_core_output_keeps_first_appearance_order():
    # j is private to operand 0 of jik,kl->il: the core output is ik, broadcast along j.
    spec = spec_of("jik,kl->il", [(3, 2, 4), (4, 5)], 0)
    assert (spec.core_output, spec.broadcast) == ("ik", "j")
    # The operand's own order, not sorted and not the other operand's order.
    spec = spec_of("ba,ab->", [(3, 2), (2, 3)], 0)
    assert spec.core_output == "ba"
    assert spec.unreduce == "none"


def test_core_is_an_equation_over_the_forward_sizes():
    eq = parse_equation("ijj,k->ik", [(2, 3, 3), (4,)])
    core = derive_gradient(eq, 0).core(eq)
    assert isinstance(core, Equation)
    assert core.explicit == "ik,k->i"
    assert core.shapes == ((2, 4), (4,))
    assert dict(core.size_dict) == {"i": 2, "k": 4}


def test_derive_gradients_follows_the_given_positions():
    eq = parse_equation("i,j,ij->", [(3,), (4,), (3, 4)])
    specs = derive_gradients(eq, (2, 0))
    assert [s.operand for s in specs] == [2, 0]
    assert derive_gradients(eq, ()) == ()


def test_derivation_is_pure():
    eq = parse_equation("ijj,k->ik", [(2, 3, 3), (4,)])
    assert derive_gradient(eq, 0) == derive_gradient(eq, 0)
    assert eq.explicit == "ijj,k->ik"


# --- after normalisation: ellipsis and size-1 broadcasting -----------------------------------


def test_ellipsis_with_size_one_broadcast_dims():
    # ...ij,...jk->...ik with batch (8, 1) against (1, 4): after parsing, each operand
    # has one size-1 label of its own, private, in place of the broadcast batch dim.
    eq = parse_equation("...ij,...jk->...ik", [(8, 1, 3, 4), (1, 4, 4, 2)])
    a, b = eq.terms
    sizes = eq.size_dict
    private_a = [c for c in a if c not in b and c not in eq.output]
    private_b = [c for c in b if c not in a and c not in eq.output]
    assert len(private_a) == len(private_b) == 1
    assert sizes[private_a[0]] == sizes[private_b[0]] == 1

    spec0 = derive_gradient(eq, 0)
    assert spec0.broadcast == private_a[0]
    assert spec0.core_terms == (eq.output, b)
    assert spec0.core_output == a.replace(private_a[0], "")
    assert not spec0.has_diagonal
    assert spec0.unreduce == "view"
    # A size-1 broadcast costs nothing: the core already has the operand's size.
    assert spec0.core_elements == spec0.elements == 8 * 3 * 4

    spec1 = derive_gradient(eq, 1)
    assert spec1.broadcast == private_b[0]
    assert spec1.core_output == b.replace(private_b[0], "")
    assert spec1.core_elements == spec1.elements == 4 * 4 * 2
    assert spec1.unreduce == "view"


def test_size_one_vector_against_a_contracted_index():
    # ij,j->i with j of size 1 in operand 1: j broadcasts, so after normalisation j
    # (size 4) is private to operand 0 and operand 1 has a private size-1 label.
    eq = parse_equation("ij,j->i", [(3, 4), (1,)])
    (c,) = eq.terms[1]
    assert c != "j" and eq.size_dict[c] == 1
    spec0 = derive_gradient(eq, 0)
    assert (spec0.core_equation, spec0.broadcast) == (f"i,{c}->i", "j")
    assert (spec0.core_elements, spec0.elements, spec0.unreduce) == (3, 12, "view")
    spec1 = derive_gradient(eq, 1)
    assert (spec1.core_equation, spec1.broadcast) == ("i,ij->", c)
    assert (spec1.core_elements, spec1.elements) == (1, 1)


# --- unreduce_kind ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "target", "kind"),
    [
        ("ab", "ab", "none"),
        ("", "", "none"),
        ("ba", "ab", "view"),  # a permutation
        ("ik", "ijk", "view"),  # a broadcast
        ("", "ab", "view"),
        ("i", "ii", "embed"),
        ("", "ii", "embed"),
        ("ij", "ijj", "embed"),
        ("ij", "jij", "embed"),
    ],
)
def test_unreduce_kind(source, target, kind):
    assert unreduce_kind(source, target) == kind
