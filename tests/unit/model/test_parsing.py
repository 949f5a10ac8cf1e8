"""User text to values: byte sizes, shapes, index sizes, operand lists, names, budgets."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import einsum_analyze.model.parsing as parsing
from einsum_analyze import PlanningError, ShapeError, parse_equation
from einsum_analyze.errors import BudgetError, InputFileError
from einsum_analyze.model.parsing import (
    parse_budget_strategy,
    parse_byte_budget,
    parse_bytes,
    parse_count,
    parse_memory_limit,
    parse_operand_list,
    parse_seconds,
    parse_shapes,
    parse_sizes,
    parse_strategy_names,
    shapes_from_value,
    sizes_from_value,
)

# --- parse_bytes -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0", 0),
        ("4096", 4096),
        ("4096B", 4096),
        ("4096 b", 4096),
        ("1KB", 1000),
        ("1kb", 1000),
        ("2MB", 2_000_000),
        ("2GB", 2 * 10**9),
        ("3TB", 3 * 10**12),
        ("1KiB", 1024),
        ("1kib", 1024),
        ("512MiB", 512 * 2**20),
        ("512 MIB", 512 * 2**20),
        ("2GiB", 2 * 2**30),
        ("1TiB", 2**40),
        ("1.5KiB", 1536),
        (".5KB", 500),
        ("0.5GiB", 2**29),
        ("1.5e9B", 1_500_000_000),
        ("1e3", 1000),
        ("1.5B", 1),  # rounded down
        ("  64MiB  ", 64 * 2**20),
        # whole numbers stay exact beyond float precision
        ("123456789012345678901", 123456789012345678901),
        ("123456789012345678901TiB", 123456789012345678901 * 2**40),
    ],
)
def test_parse_bytes(text, expected):
    assert parse_bytes(text) == expected
    assert isinstance(parse_bytes(text), int)


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("", r"'' is not a byte size"),
        ("lots", r"'lots' is not a byte size"),
        ("-5MiB", r"'-5MiB' is not a byte size"),
        ("5 M iB", r"is not a byte size"),
        ("1,5GB", r"is not a byte size"),
        ("MiB", r"'MiB' is not a byte size"),
        ("5XB", r"unknown unit 'XB' in '5XB'"),
        ("5mibs", r"unknown unit 'mibs'"),
        ("5kibit", r"unknown unit 'kibit'"),
    ],
)
def test_parse_bytes_errors(text, match):
    with pytest.raises(ValueError, match=match):
        parse_bytes(text)


def test_parse_bytes_overflow_is_a_value_error():
    with pytest.raises(ValueError, match=r"1e400"):
        parse_bytes("1e400")


# --- parse_shapes ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("512x2,2x7,()", ((512, 2), (2, 7), ())),
        ("512x2,512x2,2x7,7x2x7", ((512, 2), (512, 2), (2, 7), (7, 2, 7))),
        ("3", ((3,),)),
        ("()", ((),)),
        ("(),()", ((), ())),
        (" 2x3 , 3X4 ", ((2, 3), (3, 4))),
        ("2x3,3,()", ((2, 3), (3,), ())),
        ("0x3", ((0, 3),)),  # size 0 is a size torch.einsum accepts
        ("[[512,2],[2,7],[]]", ((512, 2), (2, 7), ())),
        (" [[8, 1, 32, 64], [1, 4, 64, 16]] ", ((8, 1, 32, 64), (1, 4, 64, 16))),
        ("[]", ()),
        ("[[]]", ((),)),
        ("[[-1]]", ((-1,),)),  # likewise rejected later, with the operand named
    ],
)
def test_parse_shapes(text, expected):
    shapes = parse_shapes(text)
    assert shapes == expected
    assert all(isinstance(d, int) for shape in shapes for d in shape)


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("", r"--shapes is empty"),
        ("   ", r"--shapes is empty"),
        ("2x3,,4", r"--shapes item 1 is empty; write \(\) for a scalar"),
        ("2x3,", r"--shapes item 1 is empty"),
        ("2x", r"--shapes item 0 '2x' is not of the form AxBxC"),
        ("2x3,3xb", r"--shapes item 1 '3xb' is not of the form AxBxC"),
        ("2*3", r"item 0 '2\*3' is not of the form"),
        ("2x-3", r"item 0 '2x-3' is not of the form"),
        ("2.5x3", r"item 0 '2\.5x3' is not of the form"),
        ("(2,3)", r"item 0 '\(2' is not of the form"),
        ("[[2,3]", r"--shapes is not valid JSON"),
        ("[1,2]", r"--shapes JSON must be a list of lists"),
        ("[[1],2]", r"--shapes JSON must be a list of lists"),
        ("[[2,3],[2.5]]", r"--shapes operand 1 has size 2\.5; sizes are whole numbers"),
        ("[[2,true]]", r"--shapes operand 0 has size True"),
        ("[[\"2\"]]", r"--shapes operand 0 has size '2'"),
        ("[[1e3]]", r"--shapes operand 0 has size 1000\.0"),
    ],
)
def test_parse_shapes_errors(text, match):
    with pytest.raises(ShapeError, match=match):
        parse_shapes(text)


# --- parse_sizes -------------------------------------------------------------------------


def test_parse_sizes():
    assert parse_sizes("b=512,c=2") == {"b": 512, "c": 2}
    assert parse_sizes(" a = 2 , B=3 ") == {"a": 2, "B": 3}
    assert parse_sizes("i=1099511627776") == {"i": 2**40}
    assert list(parse_sizes("z=1,a=2")) == ["z", "a"]  # order kept


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("", r"--sizes item '' is not of the form label=size"),
        ("a=2,", r"--sizes item '' is not of the form"),
        ("a:2", r"--sizes item 'a:2' is not of the form label=size"),
        ("a", r"--sizes item 'a' is not of the form"),
        ("ab=2", r"--sizes item 'ab=2' is not of the form"),
        ("=2", r"--sizes item '=2' is not of the form"),
        ("#=2", r"--sizes item '#=2' is not of the form"),
        ("a=", r"--sizes item 'a=' is not of the form"),
        ("a=x", r"--sizes item 'a=x' is not of the form"),
        ("a=-1", r"--sizes item 'a=-1' is not of the form"),
        ("a=2.5", r"--sizes item 'a=2\.5' is not of the form"),
        ("a=2,b=3,a=4", r"--sizes gives index 'a' twice"),
    ],
)
def test_parse_sizes_errors(text, match):
    with pytest.raises(ShapeError, match=match):
        parse_sizes(text)


# --- parse_operand_list ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "num", "expected"),
    [
        ("all", 4, (0, 1, 2, 3)),
        (" ALL ", 2, (0, 1)),
        ("all", 0, ()),
        ("none", 4, ()),
        ("None", 4, ()),
        ("0,3", 4, (0, 3)),
        ("3,0", 4, (0, 3)),
        ("1,1", 4, (1,)),
        ("9-17", 18, tuple(range(9, 18))),
        ("0,2-3", 5, (0, 2, 3)),
        ("2-3,0-2", 5, (0, 1, 2, 3)),
        ("4-4", 5, (4,)),
        (" 0 , 1-2 ", 3, (0, 1, 2)),
    ],
)
def test_parse_operand_list(text, num, expected):
    assert parse_operand_list(text, num) == expected


@pytest.mark.parametrize(
    ("text", "num", "match"),
    [
        ("", 3, r"operand list item '' is not a position or a range"),
        ("x", 3, r"operand list item 'x' is not a position"),
        ("0,a", 3, r"operand list item 'a'"),
        ("-1", 3, r"operand list item '-1' is not a position"),
        ("1-", 3, r"operand list item '1-'"),
        ("1-2-3", 5, r"operand list item '1-2-3'"),
        ("1.5", 3, r"operand list item '1\.5'"),
        ("3-1", 5, r"operand range '3-1' runs backwards"),
        ("3", 3, r"operand 3 does not exist; the equation has operands 0\.\.2"),
        ("9-17", 10, r"operand 17 does not exist; the equation has operands 0\.\.9"),
        ("0", 0, r"operand 0 does not exist"),
    ],
)
def test_parse_operand_list_errors(text, num, match):
    with pytest.raises(PlanningError, match=match):
        parse_operand_list(text, num)


# --- budget figures ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [("1e9", 10**9), ("2_000_000", 2_000_000), (" 48 ", 48), (1e3, 1000), (7, 7), ("1.5e3", 1500)],
)
def test_parse_count_accepts_whole_numbers(text: object, expected: int) -> None:
    assert parse_count(text) == expected


@pytest.mark.parametrize("text", ["1.5", "-3", "abc", "", True, 2.5, float("inf"), None])
def test_parse_count_refuses_other_values(text: object) -> None:
    with pytest.raises(BudgetError, match="max-flops"):
        parse_count(text, "max-flops")


@pytest.mark.parametrize(
    ("text", "expected"),
    [("0.5", 0.5), ("250ms", 0.25), ("20us", 2e-5), ("3ns", 3e-9), (2, 2.0), ("1s", 1.0)],
)
def test_parse_seconds(text: object, expected: float) -> None:
    assert parse_seconds(text) == pytest.approx(expected)


@pytest.mark.parametrize("text", ["fast", "-1", "1min", False, float("nan")])
def test_parse_seconds_refuses(text: object) -> None:
    with pytest.raises(BudgetError, match="max-time"):
        parse_seconds(text)


@pytest.mark.parametrize(("value", "expected"), [("2KiB", 2048), (512, 512), (64.0, 64),
                                                 ("1e3", 1000), (0, 0)])
def test_parse_byte_budget(value: object, expected: int) -> None:
    assert parse_byte_budget(value, "max-peak") == expected


@pytest.mark.parametrize(
    ("value", "match"),
    [(-1, "max-peak is -1; expected a size of at least 0 B"),
     (True, "max-peak is True; expected bytes"),
     (1.5, "max-peak is 1.5; expected bytes"),
     ("5XB", "max-peak: unknown unit 'XB' in '5XB'"),
     ([1], "max-peak is \\[1\\]; expected bytes")],
)
def test_parse_byte_budget_refuses(value: object, match: str) -> None:
    with pytest.raises(BudgetError, match=match):
        parse_byte_budget(value, "max-peak")


def test_parse_budget_strategy() -> None:
    names = ("reverse", "independent")
    assert parse_budget_strategy(" ALL ", names) == "all"
    assert parse_budget_strategy("Independent", names) == "independent"
    with pytest.raises(BudgetError, match="unknown budget strategy 'x'; choose all or one of: "
                       "reverse, independent"):
        parse_budget_strategy("x", names)
    with pytest.raises(BudgetError, match="budget-strategy is 3; expected a strategy name"):
        parse_budget_strategy(3, names)


# --- strategy names, and shapes and sizes as files hold them -----------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [("reverse,independent", ("reverse", "independent")),
     (" Reverse , ,TORCH-autograd ", ("reverse", "torch-autograd")),
     ("none", ()), ("None", ()), ("", ()), (" , ", ()),
     (["Reverse", " independent"], ("reverse", "independent")), (["none"], ()), ([], ())],
)
def test_parse_strategy_names(value: object, expected: tuple[str, ...]) -> None:
    assert parse_strategy_names(value) == expected


@pytest.mark.parametrize("value", [3, None, ["reverse", 2], {"a": 1}])
def test_parse_strategy_names_refuses(value: object) -> None:
    with pytest.raises(InputFileError, match="case 'x' strategy is .*; expected names such as "
                       "'reverse,independent' or a list"):
        parse_strategy_names(value, "case 'x'")


def test_shapes_and_sizes_from_values() -> None:
    assert shapes_from_value("2x3,()", "case 'x'") == ((2, 3), ())
    assert shapes_from_value([[2, 3], []], "case 'x'") == ((2, 3), ())
    assert sizes_from_value("a=2,b=3", "case 'x'") == {"a": 2, "b": 3}
    assert sizes_from_value({"a": 2}, "case 'x'") == {"a": 2}


@pytest.mark.parametrize(
    ("value", "match"),
    [({"a": 2}, "case 'x' shapes must be a list of lists"),
     ([[2, "3"]], "case 'x' operand 0 has size '3'; sizes are whole numbers"),
     ([[2], [True]], "case 'x' operand 1 has size True")],
)
def test_shapes_from_value_refuses(value: object, match: str) -> None:
    with pytest.raises(ShapeError, match=match):
        shapes_from_value(value, "case 'x'")


@pytest.mark.parametrize(
    ("value", "match"),
    [([2], "case 'x' sizes must be a table"),
     ({"ab": 2}, "case 'x' sizes has 'ab'; an index is one letter"),
     ({"a": 2.0}, "case 'x' gives index 'a' size 2.0; sizes are whole numbers")],
)
def test_sizes_from_value_refuses(value: object, match: str) -> None:
    with pytest.raises(ShapeError, match=match):
        sizes_from_value(value, "case 'x'")


# --- memory limits -----------------------------------------------------------------------


def test_parse_memory_limit_reads_elements_bytes_and_max_input() -> None:
    eq = parse_equation("ab,bc->ac", [(2, 3), (3, 5)])
    assert parse_memory_limit(None, eq, 4) is None
    assert parse_memory_limit(7, eq, 4) == 7
    assert parse_memory_limit("1e2", eq, 4) == 100  # no unit: elements
    assert parse_memory_limit("1KiB", eq, 8) == 128
    assert parse_memory_limit("max_input", eq, 4) == 15  # b x c = 15 > a x c = 10 > 6
    with pytest.raises(PlanningError, match="memory limit '2B' is less than one element"):
        parse_memory_limit("2B", eq, 4)


def test_parse_memory_limit_is_still_importable_from_planning() -> None:
    from einsum_analyze.model import planning

    assert planning.parse_memory_limit is parse_memory_limit


def test_parsing_imports_only_the_records_below_it() -> None:
    # parsing is the bottom of the package: it must not reach planning, strategies or the
    # report, or moving a parser here would make a cycle (the package's
    # dependency direction).
    tree = ast.parse(Path(parsing.__file__).read_text(encoding="utf-8"))
    imported = {(node.level, node.module) for node in ast.walk(tree)
                if isinstance(node, ast.ImportFrom) and node.level}
    assert imported == {(1, "types"), (2, "errors"), (1, "equation")}
