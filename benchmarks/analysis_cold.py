"""Section (a) of bench_analysis.py: the analysis-only command line's cold start.

``python3 -m einsum_analyze EQUATION --shapes ... --json FILE`` on the ``tn18-b512`` case
of ``benchmarks/cases.json`` (and the installed ``einsum-analyze`` script when it is on
PATH), each a fresh process, interleaved round by round after one warm-up run each, with
``python3 -c pass`` and ``python3 -c "import opt_einsum"`` beside them. Each process gives
its wall seconds (``time.perf_counter`` around it) and its user + system CPU seconds
(``getrusage`` of the children). Target (issues 2 and 21): median at most 0.3 s.
"""

from __future__ import annotations

import functools
import json
import os
import resource
import shlex
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

COLD_CASE = "tn18-b512"
COLD_TARGET_S = 0.3


@functools.lru_cache(maxsize=1)
def cli_help() -> str:
    """The output of ``python3 -m einsum_analyze --help``."""
    done = subprocess.run(
        [sys.executable, "-m", "einsum_analyze", "--help"],
        capture_output=True,
        text=True,
        check=False,
    )
    return done.stdout


def cli_args(case: dict[str, Any], json_path: str, help_text: str) -> list[str]:
    """Arguments of an analysis-only CLI run (``--device none`` where the CLI has it)."""
    args = [
        case["equation"],
        "--shapes",
        json.dumps(case["shapes"], separators=(",", ":")),
        "--json",
        json_path,
    ]
    if "--device" in help_text:
        args += ["--device", "none"]
    return args


def cold_commands(
    case: dict[str, Any], json_path: str, pyc_env: dict[str, str] | None
) -> list[tuple[str, list[str], bool, dict[str, str] | None]]:
    """(label, argv, counts toward the target, environment override) for every process."""
    py = sys.executable
    help_text = cli_help()
    args = cli_args(case, json_path, help_text)
    commands: list[tuple[str, list[str], bool, dict[str, str] | None]] = [
        ("python3 -c pass", [py, "-c", "pass"], False, None),
        ('python3 -c "import opt_einsum"', [py, "-c", "import opt_einsum"], False, None),
        ('python3 -c "import einsum_analyze"', [py, "-c", "import einsum_analyze"], False, None),
        (
            "python3 -m einsum_analyze ... --json FILE",
            [py, "-m", "einsum_analyze", *args],
            True,
            None,
        ),
    ]
    on_path = shutil.which("einsum-analyze")
    if on_path:
        commands.append(("einsum-analyze ... --json FILE", [on_path, *args], True, None))
    # A version manager's shim (pyenv) on PATH adds a shell start; time the real script too.
    real = Path(sysconfig.get_path("scripts")) / "einsum-analyze"
    if real.exists() and (on_path is None or os.path.realpath(on_path) != os.path.realpath(real)):
        commands.append(
            ("einsum-analyze (interpreter's bin/) ... --json FILE", [str(real), *args], True, None)
        )
    path_python = shutil.which("python3")
    if path_python and os.path.realpath(path_python) != os.path.realpath(py):
        commands.append(
            (
                "python3 (first on PATH) -m einsum_analyze ... --json FILE",
                [path_python, "-m", "einsum_analyze", *args],
                True,
                None,
            )
        )
    if "--strategy" in help_text:
        commands.append(
            (
                "python3 -m einsum_analyze ... --json FILE --strategy none",
                [py, "-m", "einsum_analyze", *args, "--strategy", "none"],
                False,
                None,
            )
        )
    if pyc_env is not None:
        commands.append(("python3 -c pass [bytecode cached]", [py, "-c", "pass"], False, pyc_env))
        commands.append(
            (
                "python3 -m einsum_analyze ... --json FILE [bytecode cached]",
                [py, "-m", "einsum_analyze", *args],
                True,
                pyc_env,
            )
        )
    return commands


def run_cold(case: dict[str, Any], repeats: int,
             summarize: Callable[[Sequence[float]], dict[str, float]],
             compare_with: Path | None = None) -> dict[str, Any]:
    """Time fresh processes of the CLI and the baselines, interleaved round by round.

    ``compare_with``: a folder holding another ``einsum_analyze`` (an older checkout),
    whose CLI runs are interleaved with the others as rows marked ``[other]``.
    """
    import opt_einsum

    _, info = opt_einsum.contract_path(case["equation"], *case["shapes"], shapes=True)
    expected_flops = int(info.opt_cost)
    with tempfile.TemporaryDirectory(prefix="bench_analysis_") as tmp:
        json_path = os.path.join(tmp, "report.json")
        env = dict(os.environ)
        env.pop("PYTHONPROFILEIMPORTTIME", None)
        pyc_env = None
        if env.get("PYTHONDONTWRITEBYTECODE"):
            # This environment disables bytecode caching, so an editable install recompiles
            # its modules in every process. Also time the usual case, with the cache in a
            # private folder (nothing is written next to the sources).
            pyc_env = {k: v for k, v in env.items() if k != "PYTHONDONTWRITEBYTECODE"}
            pyc_env["PYTHONPYCACHEPREFIX"] = os.path.join(tmp, "pycache")
        commands = cold_commands(case, json_path, pyc_env)
        if compare_with is not None:
            other = {**env, "PYTHONPATH": str(compare_with)}
            argv = [sys.executable, "-m", "einsum_analyze", *cli_args(case, json_path, cli_help())]
            commands.append(("python3 -m einsum_analyze ... --json FILE [other]", argv, False,
                             other))
            if pyc_env is not None:
                cached = {**pyc_env, "PYTHONPATH": str(compare_with),
                          "PYTHONPYCACHEPREFIX": os.path.join(tmp, "pycache-other")}
                commands.append(("python3 -m einsum_analyze ... --json FILE [bytecode cached] "
                                 "[other]", argv, False, cached))
        cli_line = "python3 -m einsum_analyze " + shlex.join(
            [a if a != json_path else "FILE" for a in cli_args(case, json_path, cli_help())]
        )
        problems: list[str] = []

        def once(argv: list[str], env_override: dict[str, str] | None) -> tuple[float, float]:
            """Wall seconds of one process, and its user + system CPU seconds."""
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            start = time.perf_counter()
            done = subprocess.run(
                argv,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                env=env_override or env,
                cwd=tmp,
                check=False,
            )
            elapsed = time.perf_counter() - start
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
            if done.returncode != 0:
                raise RuntimeError(
                    f"{' '.join(argv[:3])} exited {done.returncode}: "
                    f"{done.stderr.decode(errors='replace').strip()[-800:]}"
                )
            return elapsed, cpu

        # Warm-up (page cache, bytecode cache), then check each CLI's report.
        for label, argv, _, env_override in commands:
            writes_report = "--json" in argv
            if writes_report and os.path.exists(json_path):
                os.remove(json_path)
            once(argv, env_override)
            if writes_report:
                with open(json_path, encoding="utf-8") as stream:
                    report = json.load(stream)
                flops = report["forward"]["flops"]
                if flops != expected_flops:
                    problems.append(f"{label}: FLOPs {flops} != opt_einsum's {expected_flops}")
        samples: dict[str, list[float]] = {label: [] for label, *_ in commands}
        cpu: dict[str, list[float]] = {label: [] for label, *_ in commands}
        for round_ in range(repeats):
            for label, argv, _, env_override in commands if round_ % 2 == 0 else commands[::-1]:
                waited, spent = once(argv, env_override)
                samples[label].append(waited)
                cpu[label].append(spent)
    rows = []
    for label, argv, is_target, _ in commands:
        stats = summarize(samples[label])
        rows.append(
            {
                "label": label,
                "argv0": argv[0],
                "target_row": is_target,
                "cpu_median": statistics.median(cpu[label]),
                **stats,
                "met": (stats["median"] <= COLD_TARGET_S) if is_target else None,
            }
        )
    return {
        "case": COLD_CASE,
        "expected_flops": expected_flops,
        "rows": rows,
        "problems": problems,
        "repeats": repeats,
        "cli_line": cli_line,
        "other": str(compare_with) if compare_with is not None else None,
    }


def print_cold(result: dict[str, Any], table: Callable[..., str],
               fmt_s: Callable[[float], str]) -> None:
    """Print the cold-start table."""
    print(
        f"\n## (a) Cold start, case {result['case']} "
        f"({result['repeats']} runs each after 1 warm-up; target: median <= "
        f"{COLD_TARGET_S} s)\n"
    )
    rows = []
    for row in result["rows"]:
        met = "-" if row["met"] is None else ("yes" if row["met"] else "NO")
        rows.append(
            [
                row["label"],
                fmt_s(row["median"]),
                fmt_s(row["iqr"]),
                f"{fmt_s(row['min'])} / {fmt_s(row['max'])}",
                fmt_s(row["cpu_median"]),
                met,
            ]
        )
    print(f"CLI run: {result['cli_line']}\n")
    print(table(["command", "median", "IQR", "min / max", "CPU median", "target met"],
                         rows))
    print("\nmedian, IQR, min / max: wall seconds from process start to exit (the JSON is "
          "written last); CPU median: the process's user + system seconds (getrusage), which "
          "other jobs on the machine inflate less than wall seconds.")
    print(
        f"\nEvery CLI run's JSON report has forward FLOPs "
        f"{'equal to' if not result['problems'] else 'DIFFERENT from'} opt_einsum's "
        f"({result['expected_flops']})."
    )
    for problem in result["problems"]:
        print(f"  PROBLEM: {problem}")
    if result.get("other"):
        print(f"'[other]' rows run the package under {result['other']} (--compare-with).")
    if any("[bytecode cached]" in r["label"] for r in result["rows"]):
        print(
            "PYTHONDONTWRITEBYTECODE is set here, so the editable einsum_analyze is "
            "recompiled in every process; '[bytecode cached]' rows keep a bytecode cache "
            "in a temporary PYTHONPYCACHEPREFIX, as a usual install would."
        )
