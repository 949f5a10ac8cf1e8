"""The suite reads nothing outside the repository, cites no design file outside it, and its
property tests reject draws with ``assume`` rather than passing them by returning early."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# A path out of the checkout: a parent-relative 'shared' folder, an absolute path under
# /work, or a parent of the repository root built in code.
OUTSIDE = re.compile(r"\.\./shared|['\"]/work/|\bshared['\"]?\s*/\s*['\"]?bench|ROOT\.parent\b")
# A citation of the design notes that live outside the repository (docs/method.md is ours).
DESIGN = re.compile(r"DESIGN\.md")


def files(folder: str, *suffixes: str) -> list[Path]:
    return sorted(p for p in (ROOT / folder).rglob("*") if p.suffix in suffixes)


def offending_lines(paths: list[Path], pattern: re.Pattern[str]) -> list[str]:
    found = []
    for path in paths:
        if path == Path(__file__).resolve():
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if pattern.search(line):
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    return found


def test_patterns_match_what_they_forbid():
    assert OUTSIDE.search('path = ROOT.parent / "shared" / "bench" / "cases.json"')
    assert OUTSIDE.search("open('../shared/bench/cases.json')")
    assert OUTSIDE.search('Path("/work/shared/bench/cases.json")')
    assert not OUTSIDE.search('ROOT / "benchmarks" / "cases.json"')
    assert DESIGN.search("(DESIGN.md section 7)")


def test_no_test_reads_outside_the_repository():
    found = offending_lines(files("tests", ".py", ".toml", ".json"), OUTSIDE)
    assert not found, "tests read outside the repository:\n" + "\n".join(found)


def test_references_cite_docs_method_not_an_outside_design_file():
    paths = [*files("einsum_analyze", ".py"), *files("tests", ".py"), *files("docs", ".md"),
             *files("examples", ".py", ".sh", ".md"), *files("benchmarks", ".py"),
             ROOT / "README.md"]
    found = offending_lines(paths, DESIGN)
    assert not found, "cite docs/method.md instead:\n" + "\n".join(found)


def test_cited_sections_of_docs_method_exist():
    headings = set(re.findall(r"^## (\d+)\. ", (ROOT / "docs" / "method.md").read_text(
        encoding="utf-8"), flags=re.MULTILINE))
    paths = [*files("einsum_analyze", ".py"), *files("tests", ".py"), *files("docs", ".md")]
    cited = {
        (str(path.relative_to(ROOT)), number)
        for path in paths
        for number in re.findall(r"method\.md,? section (\d+)", path.read_text(encoding="utf-8"))
    }
    assert cited, "no citation found: the pattern is out of date"
    missing = sorted(f"{where} cites section {n}" for where, n in cited if n not in headings)
    assert not missing, "docs/method.md has no such section:\n" + "\n".join(missing)


def early_returns(source: str) -> list[str]:
    """Functions decorated with hypothesis's ``given`` that contain a ``return``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        decorators = [d.func if isinstance(d, ast.Call) else d for d in node.decorator_list]
        names = {d.id if isinstance(d, ast.Name) else getattr(d, "attr", "") for d in decorators}
        if "given" not in names:
            continue
        # Nested functions may return; the test's own body may not.
        body = [n for stmt in node.body for n in ast.walk(stmt)]
        nested = {id(n) for d in body if isinstance(d, ast.FunctionDef | ast.Lambda)
                  for n in ast.walk(d) if n is not d}
        if any(isinstance(n, ast.Return) and id(n) not in nested for n in body):
            found.append(f"{node.name}:{node.lineno}")
    return found


def test_the_early_return_check_sees_one():
    source = (
        "@settings(deadline=None)\n"
        "@given(x=st.integers())\n"
        "def test_a(x):\n"
        "    if x > 3:\n"
        "        return\n"
        "    def helper():\n"
        "        return 1\n"
        "@given(st.integers())\n"
        "def test_b(x):\n"
        "    assume(x > 3)\n"
        "    check = lambda: 1\n"
        "    def inner():\n"
        "        return 2\n"
    )
    assert early_returns(source) == ["test_a:3"]


def test_property_tests_use_assume_not_an_early_return():
    found = [
        f"{path.relative_to(ROOT)}:{where}"
        for path in files("tests", ".py")
        for where in early_returns(path.read_text(encoding="utf-8"))
    ]
    assert not found, "use hypothesis.assume instead of returning early:\n" + "\n".join(found)
