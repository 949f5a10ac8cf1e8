"""Every deterministic console example in README.md and docs/ reruns as the page shows it.

A ``console`` block whose first line is ``$ einsum-analyze ...`` (optionally after
``COLUMNS=N``) and that analyses only (``--device none``) is run again and compared
with the page line by line: what a page shows is what the tool prints. Lines with a
machine-dependent figure (analysis time) compare up to that figure. Blocks that run on
a device are machine-dependent as a whole and must say so in the line above the block.

After a change of the output, rewrite the pages with:

    PYTHONPATH=. python tests/docs/test_doc_examples.py --update
"""

from __future__ import annotations

import re
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner

from einsum_analyze.cli import cli

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"```console\n(.*?)```", re.S)
MACHINE_DEPENDENT = re.compile(r"(analysis time)\s*│?\s*[0-9.]+ [a-z]+\s*│?")
DEFAULT_COLUMNS = 100
UNHURRIED = ["--max-search-time", "60"]
"""Given to each rerun without its own: the pages show a search that ended by itself, and
under load the default 1 s deadline can stop one sooner (a test failed so)."""


@dataclass(frozen=True)
class Example:
    page: Path
    start: int  # offset of the block's text in the page
    text: str

    @property
    def command(self) -> str:
        return self.text.splitlines()[0]

    def arguments(self) -> tuple[list[str], dict[str, str]]:
        words = shlex.split(self.command.removeprefix("$ "))
        env = {"COLUMNS": str(DEFAULT_COLUMNS)}
        while words and "=" in words[0]:
            name, _, value = words.pop(0).partition("=")
            env[name] = value
        assert words[0] == "einsum-analyze", self.command
        return words[1:], env

    @property
    def deterministic(self) -> bool:
        return "--device none" in self.command


def examples() -> list[Example]:
    found = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for match in BLOCK.finditer(text):
            if match.group(1).startswith("$ "):
                found.append(Example(page, match.start(1), match.group(1)))
    return found


def rerun(example: Example) -> str:
    args, env = example.arguments()
    if "--max-search-time" not in args:
        args = [*args, *UNHURRIED]
    result = CliRunner().invoke(cli, args, env=env, catch_exceptions=False)
    assert result.exit_code in (0, 1), result.stderr
    return f"{example.command}\n{result.stdout}{result.stderr}"


def normalise(text: str) -> list[str]:
    return [MACHINE_DEPENDENT.sub(r"\1 <machine-dependent>", line.rstrip())
            for line in text.strip("\n").splitlines()]


EXAMPLES = examples()


def test_the_pages_have_console_examples():
    assert any(example.deterministic for example in EXAMPLES)


@pytest.mark.parametrize("example", EXAMPLES,
                         ids=lambda e: f"{e.page.name}:{e.command[:50]}")
def test_console_example_reruns_as_shown(example: Example):
    if not example.deterministic:
        before = example.page.read_text(encoding="utf-8")[: example.start]
        assert "machine-dependent" in before.rstrip().rsplit("\n", 2)[-2], example.command
        return
    assert normalise(rerun(example)) == normalise(example.text)


def test_ci_budget_json_example_is_what_the_tool_writes():
    import json

    page = (ROOT / "docs" / "ci.md").read_text(encoding="utf-8")
    shown = json.loads(re.search(r'```json\n(\{"name": "max-peak".*?)```', page, re.S).group(1))
    args = ["bc,bd,cm,mdn->bn", "--shapes", "512x2,512x2,2x7,7x2x7", "--device", "none",
            "--max-peak", "50KiB", "--json", "-", *UNHURRIED]
    result = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert json.loads(result.stdout)["budgets"] == [shown]


def test_schema_describes_broadcast_as_the_labels_no_other_operand_has():
    from einsum_analyze.report import load_schema

    text = load_schema()["$defs"]["gradient"]["properties"]["broadcast"]["description"]
    assert "size-1" not in text and "no other operand" in text


def update() -> None:
    """Rewrite every deterministic example with what the tool prints now."""
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for example in reversed([e for e in EXAMPLES if e.page == page and e.deterministic]):
            fresh = "\n".join(line.rstrip() for line in rerun(example).splitlines()) + "\n"
            text = text[: example.start] + fresh + text[example.start + len(example.text):]
        page.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    if sys.argv[1:] == ["--update"]:
        update()
    else:
        sys.exit(pytest.main([__file__, "-q"]))


def test_ci_compare_example_is_what_compare_prints():
    """docs/ci.md's ratio example: the two reports it was measured from are kept."""
    page = (ROOT / "docs" / "ci.md").read_text(encoding="utf-8")
    shown = re.search(r"```text\n(Regression: run independent.*?)```", page, re.S).group(1)
    reports = ROOT / "tests" / "docs" / "reports"
    result = CliRunner().invoke(cli, ["compare", str(reports / "slowdown_before.json"),
                                      str(reports / "slowdown_after.json")],
                                catch_exceptions=False)
    assert result.exit_code == 1
    assert result.stderr == shown


def test_readme_recommendation_is_what_the_tool_prints():
    """The README's recommendation example, rerun (its search time aside, it is exact)."""
    page = (ROOT / "README.md").read_text(encoding="utf-8")
    shown = re.search(r"```text\n(Recommended .*?)```", page, re.S).group(1)
    args = ["bc,bd,cm,mdn->bn", "--shapes", "512x2,512x2,2x7,7x2x7", "--device", "none",
            *UNHURRIED, "--budget", "48KiB"]
    result = CliRunner().invoke(cli, args, env={"COLUMNS": "100"}, catch_exceptions=False)
    assert result.exit_code == 0
    assert " ".join(shown.split()) in " ".join(result.stdout.split())
    for figure in ("reverse", "52.88 KiB", "independent", "52.60 KiB", "torch-autograd",
                   "64.88 KiB", "47.99 KiB"):
        assert figure in result.stdout
    tighter = CliRunner().invoke(cli, [*args[:-1], "40KiB"], env={"COLUMNS": "100"},
                                 catch_exceptions=False)
    assert tighter.exit_code == 1 and "EXCEEDED" in tighter.stdout
