"""Normalisation of einsum equations: hand-checked results and every rejection."""

from __future__ import annotations

import string

import numpy as np
import pytest

from einsum_analyze import EinsumAnalyzeError, Equation, EquationError, ShapeError, parse_equation
from einsum_analyze.model.equation import MAX_DIM, shapes_from_sizes, split_equation

# --- accepted equations, normalised by hand -----------------------------------------------

NORMALISED = [
    # text, shapes, explicit, size_dict (in first-seen order)
    ("ab,bc->ac", [(2, 3), (3, 4)], "ab,bc->ac", {"a": 2, "b": 3, "c": 4}),
    ("ab,bc", [(2, 3), (3, 4)], "ab,bc->ac", {"a": 2, "b": 3, "c": 4}),
    ("ba,ac", [(16, 8), (8, 4)], "ba,ac->bc", {"b": 16, "a": 8, "c": 4}),
    (" ij , jk -> ik ", [(3, 4), (4, 5)], "ij,jk->ik", {"i": 3, "j": 4, "k": 5}),
    ("ii->", [(3, 3)], "ii->", {"i": 3}),
    ("ii->i", [(3, 3)], "ii->i", {"i": 3}),
    ("ii", [(3, 3)], "ii->", {"i": 3}),
    ("iij", [(3, 3, 2)], "iij->j", {"i": 3, "j": 2}),
    ("ijj,k->ik", [(2, 3, 3), (4,)], "ijj,k->ik", {"i": 2, "j": 3, "k": 4}),
    ("iij,jk->ik", [(3, 3, 4), (4, 2)], "iij,jk->ik", {"i": 3, "j": 4, "k": 2}),
    ("ijji->", [(2, 3, 3, 2)], "ijji->", {"i": 2, "j": 3}),
    ("ij,k->i", [(3, 4), (5,)], "ij,k->i", {"i": 3, "j": 4, "k": 5}),
    ("i,j->ij", [(3,), (4,)], "i,j->ij", {"i": 3, "j": 4}),
    (",ab,->ab", [(), (2, 3), ()], ",ab,->ab", {"a": 2, "b": 3}),
    ("->", [()], "->", {}),
    ("", [()], "->", {}),
    ("a,a", [(3,), (3,)], "a,a->", {"a": 3}),
    # upper-case labels; implicit output sorts by ASCII, so upper case comes first
    ("IJ,JK->IK", [(3, 4), (4, 5)], "IJ,JK->IK", {"I": 3, "J": 4, "K": 5}),
    ("Ab,ba", [(2, 3), (3, 4)], "Ab,ba->Aa", {"A": 2, "b": 3, "a": 4}),
    ("bA,c", [(2, 3), (4,)], "bA,c->Abc", {"b": 2, "A": 3, "c": 4}),
    ("zZ,aA", [(2, 3), (4, 5)], "zZ,aA->AZaz", {"z": 2, "Z": 3, "a": 4, "A": 5}),
    # ellipsis: fresh labels are the unused ASCII letters, in order a..z then A..Z
    ("...ij,...jk->...ik", [(5, 3, 4), (5, 4, 2)], "aij,ajk->aik",
     {"a": 5, "i": 3, "j": 4, "k": 2}),
    ("...ab,...bc", [(5, 6, 3, 4), (5, 6, 4, 2)], "deab,debc->deac",
     {"d": 5, "e": 6, "a": 3, "b": 4, "c": 2}),
    ("i...->...", [(2, 3, 4)], "iab->ab", {"i": 2, "a": 3, "b": 4}),
    ("...->...", [(2, 3)], "ab->ab", {"a": 2, "b": 3}),
    ("...->...", [()], "->", {}),
    ("...ij->ij", [(2, 3, 4)], "aij->ij", {"a": 2, "i": 3, "j": 4}),
    ("...ij,jk->...ik", [(3, 4), (4, 5)], "ij,jk->ik", {"i": 3, "j": 4, "k": 5}),
    ("a...b,b...->a...", [(2, 3, 4), (4, 3)], "acb,bc->ac", {"a": 2, "c": 3, "b": 4}),
    # unequal ellipsis widths are right-aligned, as numpy broadcasts
    ("...i,...i->...", [(2, 3, 4), (3, 4)], "abi,bi->ab", {"a": 2, "b": 3, "i": 4}),
    # implicit output with ellipsis: the ellipsis labels first, then labels seen once
    ("...ij,...jk", [(2, 3, 4), (2, 4, 5)], "aij,ajk->aik", {"a": 2, "i": 3, "j": 4, "k": 5}),
    ("i..., ...", [(2, 3), (3,)], "ia,a->ai", {"i": 2, "a": 3}),
]


@pytest.mark.parametrize(("text", "shapes", "explicit", "size_dict"), NORMALISED,
                         ids=[case[0] or "empty" for case in NORMALISED])
def test_normalised_form(text, shapes, explicit, size_dict):
    eq = parse_equation(text, shapes)
    assert eq.explicit == explicit
    assert list(eq.size_dict.items()) == list(size_dict.items())
    assert eq.text == text
    assert eq.shapes == tuple(tuple(s) for s in shapes)
    assert eq.num_operands == len(shapes)
    assert ",".join(eq.terms) + "->" + eq.output == explicit
    # every label has the size of the dimension it names
    for term, shape in zip(eq.terms, eq.shapes, strict=True):
        assert len(term) == len(shape)
        assert all(eq.size_dict[c] == d for c, d in zip(term, shape, strict=True))


def test_size1_broadcast_gets_private_label():
    eq = parse_equation("ij,j->i", [(3, 4), (1,)])
    assert eq.explicit == "ij,a->i"
    assert dict(eq.size_dict) == {"i": 3, "j": 4, "a": 1}


def test_size1_broadcast_each_operand_gets_its_own_label():
    eq = parse_equation("ij,ij->ij", [(1, 4), (3, 1)])
    assert eq.explicit == "aj,ib->ij"
    assert dict(eq.size_dict) == {"a": 1, "j": 4, "i": 3, "b": 1}


def test_size1_broadcast_repeated_label_shares_one_private_label():
    eq = parse_equation("ii,i->i", [(1, 1), (3,)])
    assert eq.explicit == "aa,i->i"
    assert eq.size_dict["a"] == 1


def test_size1_everywhere_is_not_relabelled():
    eq = parse_equation("ij,jk->ik", [(1, 1), (1, 1)])
    assert eq.explicit == "ij,jk->ik"
    assert set(eq.size_dict.values()) == {1}


def test_size1_in_output_keeps_the_large_size():
    eq = parse_equation("ij,ij->ij", [(1, 4), (3, 4)])
    assert eq.output == "ij"
    assert eq.size_dict["i"] == 3


def test_ellipsis_with_size1_broadcast():
    eq = parse_equation("...ij,...jk->...ik", [(8, 1, 32, 64), (1, 4, 64, 16)])
    # ellipsis labels a (8) and b (4); each operand's size-1 one becomes private
    assert eq.explicit == "acij,dbjk->abik"
    assert dict(eq.size_dict) == {"a": 8, "c": 1, "i": 32, "j": 64, "d": 1, "b": 4, "k": 16}


def test_fresh_labels_skip_used_letters():
    eq = parse_equation("ab...,b->a...", [(2, 3, 4), (3,)])
    assert eq.explicit == "abc,b->ac"


def test_fresh_labels_beyond_ascii():
    letters = string.ascii_letters
    eq = parse_equation(letters + "...->...", [(1,) * 52 + (2,)])
    assert eq.output == "\u00c0"  # Latin-1 'À', the first letter after the 52 ASCII ones
    assert eq.size_dict["\u00c0"] == 2


def test_non_ascii_labels_are_accepted():
    # opt_einsum's generated symbols go beyond ASCII; they are labels like any other
    eq = parse_equation("\u00e9b,b\u4e00->\u00e9\u4e00", [(2, 3), (3, 4)])
    assert eq.explicit == "\u00e9b,b\u4e00->\u00e9\u4e00"
    assert dict(eq.size_dict) == {"\u00e9": 2, "b": 3, "\u4e00": 4}
    # fresh labels never collide with them
    eq = parse_equation("\u00c0...->\u00c0...", [(2, 3)])
    assert eq.explicit == "\u00c0a->\u00c0a"


def test_equation_value_semantics():
    a = parse_equation("ab,bc", [(2, 3), (3, 4)])
    b = parse_equation("ab,bc", [[2, 3], [3, 4]])
    assert a == b
    assert repr(a) == "Equation('ab,bc->ac')"


def test_split_equation():
    assert split_equation("ab, bc -> ac") == (["ab", "bc"], "ac")
    assert split_equation("ab,bc") == (["ab", "bc"], None)
    assert split_equation("...a,->...") == (["...a", ""], "...")


# --- rejections: the message names the culprit ------------------------------------------

EQUATION_ERRORS = [
    ("ab,b#->a", [(2, 3), (3, 4)], r"unknown character '#' at position 4"),
    ("ab,b_->a", [(2, 3), (3, 4)], r"unknown character '_'"),
    ("ab,b!->a", [(2, 3), (3, 4)], r"unknown character '!' at position 4"),
    ("a b;c", [(2,), (3,)], r"unknown character ';'"),
    ("a->b->c", [(2,)], r"more than one '->'"),
    ("a-b->a", [(2, 3)], r"'-' or '>' that is not part of '->'"),
    ("a>b->a", [(2, 3)], r"'-' or '>' that is not part of '->'"),
    ("ab->a-", [(2, 3)], r"'-' or '>' that is not part of '->'"),
    ("ab-->a", [(2, 3)], r"'-' or '>' that is not part of '->'"),
    ("ab->a,b", [(2, 3)], r"output 'a,b' has a ','"),
    ("a.b->a", [(2, 3)], r"operand 0 'a\.b' has a '\.'"),
    ("ab,..b->a", [(2, 3), (3,)], r"operand 1 '\.\.b' has a '\.'"),
    ("....->", [(2,)], r"operand 0 '\.\.\.\.' has a '\.'"),
    ("......a->a", [(2,)], r"not part of a single '\.\.\.'"),
    ("...a->..a", [(2,)], r"the output '\.\.a' has a '\.'"),
    ("ab,bc->az", [(2, 3), (3, 4)], r"output index 'z' does not appear in any operand"),
    ("ab->aba", [(2, 3)], r"output index 'a' appears more than once"),
]


@pytest.mark.parametrize(("text", "shapes", "match"), EQUATION_ERRORS,
                         ids=[case[0] for case in EQUATION_ERRORS])
def test_equation_errors(text, shapes, match):
    with pytest.raises(EquationError, match=match):
        parse_equation(text, shapes)


SHAPE_ERRORS = [
    # rank mismatch
    ("ab,bc->ac", [(2, 3), (3,)],
     r"operand 1 has subscripts 'bc' \(2 indices\) but its shape \(3,\) has 1 dimension"),
    ("ab->a", [(2, 3, 4)], r"operand 0 has subscripts 'ab' \(2 indices\) but its shape "
     r"\(2, 3, 4\) has 3"),
    ("a,b->ab", [(), (3,)], r"operand 0 has subscripts 'a'"),
    ("...ij->ij", [(3,)], r"operand 0 has subscripts '\.\.\.ij' \(2 named indices and '\.\.\.'\) "
     r"but its shape \(3,\) has only 1 dimension"),
    # number of shapes
    ("ab,bc->ac", [(2, 3)], r"2 operand\(s\) but 1 shape\(s\)"),
    ("ab->a", [(2, 3), (3,)], r"1 operand\(s\) but 2 shape\(s\)"),
    ("ab,bc->ac", [], r"2 operand\(s\) but 0 shape\(s\)"),
    # one index, two sizes
    ("ab,bc->ac", [(2, 3), (4, 5)],
     r"index 'b' has size 3 in an earlier operand but 4 in operand 1"),
    ("ab,bc,cd->ad", [(2, 1), (3, 4), (5, 6)], r"index 'c' has size 4 .* but 5 in operand 2"),
    ("...a,...a->a", [(2, 3), (4, 3)], r"index 'b' has size 2 .* but 4 in operand 1"),
    ("ii->", [(2, 3)], r"operand 0 repeats index 'i' with sizes 2 and 3"),
    ("ijj,k->ik", [(2, 3, 4), (5,)], r"operand 0 repeats index 'j' with sizes 3 and 4"),
    ("ii->", [(1, 3)], r"operand 0 repeats index 'i' with sizes 1 and 3"),
    # bad sizes
    ("a,ab->a", [(2,), (-1, 3)], r"operand 1 dimension 0 has size -1; sizes must be zero or "),
    ("ab,b->a", [(2, 0), (3,)], r"index 'b' has size 0 in an earlier operand but 3"),
    ("ab->a", [(2, 3.0)], r"operand 0 dimension 1 has size 3\.0; sizes are integers"),
    ("ab->a", [(2, "3")], r"operand 0 dimension 1 has size '3'; sizes are integers"),
    ("ab->a", [(True, 3)], r"operand 0 dimension 0 has size True; sizes are integers"),
    ("ab->a", [(2, None)], r"operand 0 dimension 1 has size None"),
    ("a->a", [(2**40 + 1,)], r"operand 0 dimension 0 has size 1099511627777, beyond the limit"),
    ("a,b->a", [(2,), (10**30,)], r"operand 1 dimension 0 .* beyond the limit"),
]


@pytest.mark.parametrize(("text", "shapes", "match"), SHAPE_ERRORS,
                         ids=[f"{case[0]}-{case[1]}" for case in SHAPE_ERRORS])
def test_shape_errors(text, shapes, match):
    with pytest.raises(ShapeError, match=match):
        parse_equation(text, shapes)


def test_numpy_integer_sizes_are_integers():
    eq = parse_equation("ab,b->a", [(np.int64(2), np.int32(3)), (np.int64(3),)])
    assert eq.shapes == ((2, 3), (3,))
    assert all(type(d) is int for shape in eq.shapes for d in shape)


def test_largest_accepted_size():
    eq = parse_equation("a->a", [(MAX_DIM,)])
    assert MAX_DIM == 2**40
    assert eq.size_dict["a"] == MAX_DIM


def test_errors_are_einsum_analyze_errors():
    assert issubclass(EquationError, EinsumAnalyzeError)
    assert issubclass(ShapeError, EinsumAnalyzeError)
    with pytest.raises(EinsumAnalyzeError):
        parse_equation("a1", [(2,)])


def test_error_messages_are_one_line():
    for text, shapes, _ in EQUATION_ERRORS + SHAPE_ERRORS:
        with pytest.raises(EinsumAnalyzeError) as info:
            parse_equation(text, shapes)
        assert "\n" not in str(info.value)


# --- shapes_from_sizes -------------------------------------------------------------------


def test_shapes_from_sizes():
    assert shapes_from_sizes("ab,bc->ac", {"a": 2, "b": 3, "c": 4}) == ((2, 3), (3, 4))
    assert shapes_from_sizes("ii,i", {"i": 5}) == ((5, 5), (5,))
    assert shapes_from_sizes(",a->a", {"a": 2}) == ((), (2,))
    assert shapes_from_sizes("IJ , J", {"I": 2, "J": 3}) == ((2, 3), (3,))


def test_shapes_from_sizes_feeds_parse_equation():
    sizes = {"b": 512, "c": 2, "d": 2, "m": 7, "n": 7}
    eq = parse_equation("bc,bd,cm,mdn->bn", shapes_from_sizes("bc,bd,cm,mdn->bn", sizes))
    assert eq.shapes == ((512, 2), (512, 2), (2, 7), (7, 2, 7))


@pytest.mark.parametrize(
    ("text", "sizes", "error", "match"),
    [
        ("...a,a->a", {"a": 2}, EquationError, r"cannot give the width of '\.\.\.'"),
        ("a,a->...", {"a": 2}, EquationError, r"cannot give the width of '\.\.\.'"),
        ("ab,bc->ac", {"a": 2, "b": 3, "c": 4, "z": 5}, ShapeError, r"names index 'z'"),
        ("ab,bc->ac", {"a": 2, "b": 3}, ShapeError,
         r"gives no size for index 'c' of operand 1"),
        ("a#,b", {"a": 2}, EquationError, r"unknown character '#'"),
    ],
)
def test_shapes_from_sizes_errors(text, sizes, error, match):
    with pytest.raises(error, match=match):
        shapes_from_sizes(text, sizes)


def test_equation_is_frozen():
    eq = parse_equation("ab,bc", [(2, 3), (3, 4)])
    assert isinstance(eq, Equation)
    with pytest.raises(AttributeError):
        eq.output = "ca"  # type: ignore[misc]
