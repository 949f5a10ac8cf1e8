"""The example GitHub Actions workflow: its shape, and its einsum-analyze commands run here."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from einsum_analyze.report import load_schema

ROOT = Path(__file__).resolve().parents[1]
WORKFLOW = ROOT / "examples" / "ci" / "einsum-budgets.yml"
CASES = ROOT / "examples" / "ci" / "cases.toml"
DOC = ROOT / "docs" / "ci.md"


def _load_minimal(text: str) -> dict[str, Any]:
    """Enough of YAML for this file: the job's env and each step's name, uses, if and run."""
    env: dict[str, str] = {}
    steps: list[dict[str, Any]] = []
    lines = text.splitlines()
    section = ""
    index = 0
    while index < len(lines):
        line = lines[index]
        stripped = line.strip()
        index += 1
        if not stripped or stripped.startswith("#"):
            continue
        indent = len(line) - len(line.lstrip())
        if indent == 4 and stripped.endswith(":"):
            section = stripped[:-1]
            continue
        if section == "env" and indent == 6 and ":" in stripped:
            key, _, value = stripped.partition(":")
            env[key] = value.strip().strip('"')
        if section == "steps":
            if stripped.startswith("- "):
                steps.append({})
                stripped = stripped[2:]
            key, _, value = stripped.partition(":")
            if key in ("name", "uses", "if") and steps:
                steps[-1][key] = value.strip()
            if key == "run" and steps:
                if value.strip() == "|":
                    block = []
                    while index < len(lines) and (
                        not lines[index].strip()
                        or len(lines[index]) - len(lines[index].lstrip()) > indent
                    ):
                        block.append(lines[index].strip())
                        index += 1
                    steps[-1]["run"] = "\n".join(block) + "\n"
                else:
                    steps[-1]["run"] = value.strip()
            if key == "path" and steps:
                steps[-1].setdefault("with", {})["path"] = value.strip()
    return {"jobs": {"einsum-budgets": {"env": env, "steps": steps}}}


def _workflow() -> dict[str, Any]:
    text = WORKFLOW.read_text(encoding="utf-8")
    try:
        import yaml
    except ImportError:
        return _load_minimal(text)
    data: dict[str, Any] = yaml.safe_load(text)
    return data


def _job() -> dict[str, Any]:
    job: dict[str, Any] = _workflow()["jobs"]["einsum-budgets"]
    return job


def _einsum_commands(job: dict[str, Any]) -> list[str]:
    commands = []
    for step in job["steps"]:
        for line in str(step.get("run", "")).splitlines():
            if line.strip().startswith("einsum-analyze"):
                commands.append(line.strip())
    return commands


def _run_locally(job: dict[str, Any], workdir: Path) -> subprocess.CompletedProcess[str]:
    """Run the workflow's einsum-analyze lines as GitHub does (bash -e), in ``workdir``."""
    shim = f"einsum-analyze() {{ {shlex.quote(sys.executable)} -m einsum_analyze \"$@\"; }}\n"
    script = shim + "\n".join(_einsum_commands(job)) + "\n"
    env = {**os.environ, **{k: str(v) for k, v in job["env"].items()}, "COLUMNS": "100"}
    return subprocess.run(["bash", "-e", "-c", script], cwd=workdir, env=env,
                          capture_output=True, text=True, check=False)


def _checkout(tmp_path: Path, job: dict[str, Any]) -> Path:
    """A directory laid out like the checkout the workflow sees."""
    target = tmp_path / job["env"]["CASES"]
    target.parent.mkdir(parents=True)
    shutil.copy(CASES, target)
    return target


def test_the_workflow_installs_analyses_uploads_and_fails_on_budgets() -> None:
    job = _job()
    steps = job["steps"]
    uses = [step.get("uses", "") for step in steps]
    assert any(u.startswith("actions/checkout@") for u in uses)
    assert any(u.startswith("actions/setup-python@") for u in uses)
    install = next(step["run"] for step in steps if "pip install" in step.get("run", ""))
    assert 'pip install "$EINSUM_ANALYZE"' in install
    commands = _einsum_commands(job)
    assert any("--cases" in c and '--json "$REPORT"' in c for c in commands)
    upload = next(step for step in steps if step.get("uses", "").startswith(
        "actions/upload-artifact@"))
    assert upload["if"] == "always()"  # the report is kept when a budget fails the step
    assert upload["with"]["path"] == "${{ env.REPORT }}"
    # nothing swallows the exit code: no `|| true`, no continue-on-error
    assert all("||" not in c for c in commands)
    assert not any(step.get("continue-on-error") for step in steps)


def test_the_minimal_reader_agrees_with_yaml() -> None:
    yaml = pytest.importorskip("yaml")
    text = WORKFLOW.read_text(encoding="utf-8")
    full = yaml.safe_load(text)["jobs"]["einsum-budgets"]
    minimal = _load_minimal(text)["jobs"]["einsum-budgets"]
    assert minimal["env"] == full["env"]
    assert _einsum_commands(minimal) == _einsum_commands(full)
    assert [s.get("uses") for s in minimal["steps"]] == [s.get("uses") for s in full["steps"]]


def test_the_workflow_commands_pass_locally(tmp_path: Path) -> None:
    job = _job()
    _checkout(tmp_path, job)
    done = _run_locally(job, tmp_path)
    assert done.returncode == 0, done.stderr
    report = tmp_path / job["env"]["REPORT"]  # what upload-artifact uploads
    data = json.loads(report.read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator(load_schema()).validate(data)
    assert data["summary"]["ok"] == data["summary"]["total"]


def test_the_workflow_fails_when_a_budget_is_exceeded(tmp_path: Path) -> None:
    job = _job()
    cases = _checkout(tmp_path, job)
    text = cases.read_text(encoding="utf-8")
    tightened = re.sub(r'max_peak = "256MiB"', 'max_peak = "1MiB"', text)
    assert tightened != text
    cases.write_text(tightened, encoding="utf-8")
    done = _run_locally(job, tmp_path)
    assert done.returncode == 1
    assert "Budget exceeded: case 'attention-scores': max-peak" in done.stderr
    data = json.loads((tmp_path / job["env"]["REPORT"]).read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator(load_schema()).validate(data)
    assert data["summary"]["budget_exceeded"] == 1


def test_the_workflow_fails_on_a_bad_case(tmp_path: Path) -> None:
    job = _job()
    cases = _checkout(tmp_path, job)
    with cases.open("a", encoding="utf-8") as stream:
        stream.write('\n[[cases]]\nname = "typo"\nequation = "ab,bc->ac"\nshape = "2x3,3x4"\n')
    done = _run_locally(job, tmp_path)
    assert done.returncode == 2
    assert "Error: case 'typo': " in done.stderr


def test_docs_embed_the_workflow_verbatim() -> None:
    doc = DOC.read_text(encoding="utf-8")
    blocks = re.findall(r"```yaml\n(.*?)```", doc, flags=re.DOTALL)
    assert WORKFLOW.read_text(encoding="utf-8") in blocks
    assert CASES.read_text(encoding="utf-8") in re.findall(r"```toml\n(.*?)```", doc,
                                                           flags=re.DOTALL)
