"""The suite reads nothing outside the repository, and cites no design file outside it."""

from __future__ import annotations

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
