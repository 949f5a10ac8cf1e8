"""Exit codes and streams: usage errors before stdout, files replaced whole, full outputs.

Each bad input gives one ``Error:`` line on stderr, exit 2 and nothing on stdout; a file
the command writes is renamed into place, so a failure keeps the old one.
"""

from __future__ import annotations

import errno
import json
import os
import resource
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from einsum_analyze.cli import cli
from einsum_analyze.strategies import strategy_names

EQ = ["ij,jk->ik", "--shapes", "2x3,3x4"]
ROOT = Path(__file__).resolve().parents[2]


def _invoke(args: list[str]) -> Any:
    return CliRunner().invoke(cli, args, catch_exceptions=False)


def _one_error(result: Any, code: int = 2) -> str:
    assert result.exit_code == code, result.output
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.stderr
    return str(lines[0])


def test_a_cuda_device_that_is_not_there_is_refused_before_any_table() -> None:
    import torch

    if torch.cuda.is_available():
        count = torch.cuda.device_count()
        line = _one_error(_invoke([*EQ, "--device", f"cuda:{count}"]))
        assert f"device 'cuda:{count}' does not exist" in line
        return
    line = _one_error(_invoke([*EQ, "--device", "cuda"]))
    assert line == "Error: device 'cuda' requested but no CUDA GPU is present"


@pytest.mark.parametrize("device", ["tpu", "cuda:x"])
def test_an_unknown_device_is_refused_before_any_table(device: str) -> None:
    assert f"device '{device}' is not" in _one_error(_invoke([*EQ, "--device", device]))


@pytest.mark.parametrize("name", strategy_names())
def test_budget_strategy_takes_every_registered_strategy(name: str) -> None:
    strategies = ",".join(dict.fromkeys(("reverse", name)))
    result = _invoke([*EQ, "--device", "none", "--strategy", strategies,
                      "--max-retained", "1GiB", "--budget-strategy", name, "--json", "-"])
    assert result.exit_code == 0, result.stderr
    budgets = json.loads(result.stdout)["budgets"]
    assert [b["subject"] for b in budgets] == [f"strategy {name}"]


def test_the_old_report_survives_a_failed_write(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "report.json"
    path.write_text('{"old": true}\n')
    from einsum_analyze.report import report as report_module

    def full_disk(data: Any, stream: Any) -> None:
        stream.write('{"half": ')
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(report_module, "dump_json", full_disk)
    result = _invoke([*EQ, "--device", "none", "--json", str(path)])
    assert result.exit_code == 2
    assert result.stderr.splitlines()[-1] == (
        f"Error: cannot write the JSON report to '{path}': No space left on device")
    assert path.read_text() == '{"old": true}\n'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.json"]  # no temporary


def test_a_report_is_replaced_whole_and_keeps_its_mode(tmp_path: Path) -> None:
    path = tmp_path / "report.json"
    path.write_text("old")
    path.chmod(0o640)
    assert _invoke([*EQ, "--device", "none", "--json", str(path)]).exit_code == 0
    assert json.loads(path.read_text())["equation"] == "ij,jk->ik"
    assert path.stat().st_mode & 0o777 == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.json"]


def test_a_link_is_followed_not_replaced(tmp_path: Path) -> None:
    target, link = tmp_path / "real.json", tmp_path / "link.json"
    target.write_text("old")
    link.symlink_to(target)
    assert _invoke([*EQ, "--device", "none", "--json", str(link)]).exit_code == 0
    assert link.is_symlink() and json.loads(target.read_text())["equation"] == "ij,jk->ik"


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("", "the path is empty"),
        ("/proc/version", ""),
        ("x" * 300 + ".json", "the file name is too long"),
        ("missing/r.json", "its folder does not exist"),
        ("folder.json", "it is a folder"),
    ],
    ids=["empty", "proc", "long-name", "no-folder", "folder"],
)
@pytest.mark.parametrize("option", ["--json", "--plot"])
def test_an_unwritable_output_is_refused_before_any_table(
        tmp_path: Path, name: str, reason: str, option: str) -> None:
    if option == "--plot":
        if not name:
            pytest.skip("an empty plot path has no format: refused for that first")
        name = name.replace(".json", ".svg") if name.endswith(".json") else name + ".svg"
    path = name if not name or name.startswith("/") else str(tmp_path / name)
    if "folder." in name:
        os.mkdir(path)
    line = _one_error(_invoke([*EQ, "--device", "none", option, path]))
    what = "the JSON report" if option == "--json" else "the plot"
    if path:
        assert line.startswith(f"Error: cannot write {what} to {path!r}: "), line
    assert reason in line


def test_a_dangling_link_is_refused_before_any_table(tmp_path: Path) -> None:
    link = tmp_path / "r.json"
    link.symlink_to(tmp_path / "gone" / "r.json")
    line = _one_error(_invoke([*EQ, "--device", "none", "--json", str(link)]))
    assert "a link to a missing file" in line


def test_compare_refuses_an_unwritable_json_before_reading(tmp_path: Path) -> None:
    report = tmp_path / "r.json"
    assert _invoke([*EQ, "--device", "none", "--json", str(report)]).exit_code == 0
    result = _invoke(["compare", str(report), str(report), "--json", str(tmp_path / "no" / "c")])
    assert "its folder does not exist" in _one_error(result)


def _run_script(args: list[str], **popen: Any) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "einsum_analyze", *args], env=env,
                          stderr=subprocess.PIPE, text=True, check=False, timeout=120, **popen)


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full on this system")
@pytest.mark.parametrize("json_mode", [False, True])
def test_a_full_stdout_is_one_line_and_exit_2(json_mode: bool) -> None:
    with open("/dev/full", "w") as full:
        result = _run_script([*EQ, "--device", "none", *(["--json", "-"] if json_mode else [])],
                             stdout=full)
    assert result.returncode == 2
    assert result.stderr == ("Error: cannot write the output: No space left on device "
                             "(ENOSPC)\n")


def test_a_file_size_limit_on_stdout_is_one_line_and_exit_2(tmp_path: Path) -> None:
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (512, 512))

    with open(tmp_path / "out.txt", "w") as out:
        result = _run_script([*EQ, "--device", "none"], stdout=out, preexec_fn=limit)
    assert result.returncode == 2
    assert result.stderr == "Error: cannot write the output: File too large (EFBIG)\n"


@pytest.mark.parametrize("option", ["--repeats", "--warmup"])
def test_counts_beyond_reason_are_refused_before_any_table(option: str) -> None:
    line = _one_error(_invoke([*EQ, "--device", "cpu", option, "99999999999999999999"]))
    assert line.startswith("Error: --repeats and --warmup: 1.00e20 calls per phase")
    assert line.endswith("lower them, or add --force to run anyway")


def test_repeats_bounded_by_the_flops_on_the_cpu() -> None:
    args = ["ij,jk->ik", "--shapes", "2000x3000,3000x4000", "--device", "cpu",
            "--repeats", "300000"]
    line = _one_error(_invoke(args))
    assert "(each at least its FLOPs at 5e+09 FLOP/s on the cpu)" in line


def test_a_cases_repeats_beyond_reason_fails_that_case(tmp_path: Path) -> None:
    cases = tmp_path / "c.toml"
    cases.write_text('[[cases]]\nname = "long"\nequation = "ij,jk->ik"\nshapes = "2x3,3x4"\n'
                     'repeats = 99999999999999999\ndevice = "cpu"\n'
                     '[[cases]]\nname = "fine"\nequation = "ij,jk->ik"\nshapes = "2x3,3x4"\n')
    result = _invoke(["--cases", str(cases), "--device", "none", "--json", "-"])
    assert result.exit_code == 2
    document = json.loads(result.stdout)
    assert [c["status"] for c in document["cases"]] == ["error", "ok"]
    assert "repeats and warmup: 1.00e17 calls per phase" in document["cases"][0]["error"]


def _edits() -> list[tuple[str, Any]]:
    def set_key(path: str, value: Any) -> Any:
        def edit(doc: dict[str, Any]) -> None:
            *parents, last = path.split(".")
            node: Any = doc
            for key in parents:
                node = node[int(key)] if isinstance(node, list) else node[key]
            if isinstance(node, list):
                node[int(last)] = value
            else:
                node[last] = value
        return edit

    def drop(path: str) -> Any:
        def edit(doc: dict[str, Any]) -> None:
            *parents, last = path.split(".")
            node: Any = doc
            for key in parents:
                node = node[int(key)] if isinstance(node, list) else node[key]
            del node[last]
        return edit

    return [
        ("forward-number", set_key("forward", 3)),
        ("strategy-number", set_key("strategies.0", 7)),
        ("flops-text", set_key("forward.flops", "abc")),
        ("input-bytes-missing", drop("forward.input_bytes")),
        ("high-bytes-text", set_key("strategies.0.timeline.high_bytes", "abc")),
        ("tree-parent-none", set_key("forward.tree.parent", None)),
        ("strategies-dict", set_key("strategies", {"a": 1})),
    ]


@pytest.mark.parametrize(("name", "edit"), _edits(), ids=[name for name, _ in _edits()])
def test_plot_refuses_a_hand_edited_report_in_one_line(tmp_path: Path, name: str,
                                                       edit: Any) -> None:
    pytest.importorskip("matplotlib")
    report = tmp_path / "r.json"
    assert _invoke([*EQ, "--device", "none", "--json", str(report)]).exit_code == 0
    document = json.loads(report.read_text())
    edit(document)
    report.write_text(json.dumps(document))
    result = _invoke(["plot", str(report), "-o", str(tmp_path / "p.svg")])
    line = _one_error(result)
    assert f"'{report}'" in line, line
    assert not (tmp_path / "p.svg").exists()


def test_budget_lines_on_stderr_use_the_formatter_of_the_tables() -> None:
    from einsum_analyze.render.checks import budget_failure_lines
    from einsum_analyze.report.report import BudgetCheck

    check = BudgetCheck(name="max-time", subject="run 0 (reverse, torch, cpu)",
                        limit=1e-06, value=0.00443843, unit="s")
    assert budget_failure_lines([check]) == [
        "Budget exceeded: max-time on run 0 (reverse, torch, cpu): 4.44 ms > limit 1 us"]
