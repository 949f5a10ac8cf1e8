"""A fuzz test of the command line: random strings, options and files never crash it.

Every invocation must end with exit 0, 1 or 2 and no exception other than the SystemExit
click raises; exit 2 prints one line on stderr. Analysis only (``--device none``, or a
``--device`` that runs nothing), so thousands of inputs fit in well under a minute.
The seed is fixed so a failure reproduces; FUZZ_SEED and FUZZ_COUNT widen the search.
"""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

from click.testing import CliRunner

from einsum_analyze.cli import cli

SEED = int(os.environ.get("FUZZ_SEED", "20261130"))
COUNT = int(os.environ.get("FUZZ_COUNT", "3000"))

_LABELS = "abcdijk...->,0 A"
_WEIRD = ["", " ", "-", "--", "()", "[]", "[[", "nan", "inf", "-1", "0", "1e999",
          "9" * 5000, "[" * 3000 + "]" * 3000, "\x00", "é", "αβ", "1e-5", "1_0", "abc",
          "2x", "x2", "2xx3", "[[1,2],[3]]", "[[true]]", '{"a":1}', "[[1e3]]", "a=", "=3",
          "a=1,a=2", "0-", "3-1", "all", "none", "1KiB", "1.5", "250ms", "-5ms", "1e400"]
_OPTIONS = {
    "--shapes": lambda r: r.choice(_WEIRD + [_shape_text(r), _shape_json(r)]),
    "--sizes": lambda r: r.choice(_WEIRD + [_sizes_text(r)]),
    "--optimize": lambda r: r.choice(["auto", "greedy", "optimal", "dp", "nope", ""]),
    "--memory-limit": lambda r: r.choice(_WEIRD + ["max_input", "64", "1KiB", "1e3"]),
    "--dtype": lambda r: r.choice(["float16", "bfloat16", "float64", "complex64", "int8"]),
    "--grad": lambda r: r.choice(_WEIRD + ["0", "0,1", "1-2", "5"]),
    "--strategy": lambda r: r.choice(["reverse", "none", "independent,torch-autograd", "x",
                                      "sliced", "reverse,sliced"]),
    "--budget": lambda r: r.choice(_WEIRD + ["1KiB", "64", "1e9", "1B"]),
    "--precision": lambda r: r.choice(["highest", "tf32", "bf16", "fp16", "x", ""]),
    # With --device none (every fuzz run) a --devices list is refused before anything
    # runs, so the fuzz never starts a process.
    "--devices": lambda r: r.choice(["cpu*2", "cpu*1", "cpu*0", "cuda:9", "all", "", ",",
                                     "cpu,cuda", "cpu:0,cpu:0", "cpu*99999", "x", "none"]),
    "--max-flops": lambda r: r.choice(_WEIRD),
    "--max-peak": lambda r: r.choice(_WEIRD),
    "--max-retained": lambda r: r.choice(_WEIRD),
    "--max-backward-flops": lambda r: r.choice(_WEIRD),
    "--max-time": lambda r: r.choice(_WEIRD),
    "--max-memory": lambda r: r.choice(_WEIRD),
    "--repeats": lambda r: r.choice(["0", "1", "-3", "abc", "9" * 30]),
    "--budget-strategy": lambda r: r.choice(["all", "reverse", "x"]),
    "--backend": lambda r: r.choice(["torch", "numpy", "jax"]),
    "--seed": lambda r: r.choice(["0", "-1", "9" * 40, "x"]),
    "--roofline": lambda r: r.choice(_WEIRD + ["h200", "H100", "cpu", "v100", "x.json"]
                                     + _ROOFLINE_FILES),
}
_FLAGS = ["--profile-steps", "--cotengra"]
"""Options without a value, added now and then."""
_ROOFLINE_FILES: list[str] = []
"""Profile files, good and bad, written by the test before it starts."""
_ROOFLINE_TEXTS = [
    '{"bandwidth_bytes_per_s": 1e12, "flops_per_s": 1e13}',
    '{"bandwidth_bytes_per_s": 1e12, "flops_per_s": {"float64": 1e13}}',
    '{"bandwidth_bytes_per_s": 1e12}', '{"flops_per_s": 1}', "[1]", "{", "",
    '{"bandwidth_bytes_per_s": -1, "flops_per_s": 1}', '{"bandwidth_bytes_per_s": 1e999, '
    '"flops_per_s": 1}', '{"bandwidth_bytes_per_s": 1, "flops_per_s": {"int8": 1}}',
    '{"bandwidth_bytes_per_s": 1, "flops_per_s": ' + "9" * 5000 + "}",
    '{"bandwidth_bytes_per_s": 1, "flops_per_s": 1, "name": 3}', "[" * 4000,
    '{"bandwidth_bytes_per_s": 1, "flops_per_s": 1, "name": "[/x] [bold]"}',
    '{"bandwidth_bytes_per_s": 1, "flops_per_s": 1, "name": "' + "n" * 3000 + '"}',
    '{"bandwidth_bytes_per_s": 1e-300, "flops_per_s": 1e-300}',
]


def _shape_text(r: random.Random) -> str:
    return ",".join(
        "x".join(str(r.choice([1, 2, 3, 0, 10**6, 10**30])) for _ in range(r.randint(0, 3)))
        or "()" for _ in range(r.randint(1, 4))
    )


def _shape_json(r: random.Random) -> str:
    return json.dumps([[r.choice([1, 2, 3, -1, 10**20]) for _ in range(r.randint(0, 3))]
                       for _ in range(r.randint(1, 4))])


def _sizes_text(r: random.Random) -> str:
    return ",".join(f"{label}={r.choice([1, 2, 5, 0, 10**6, 10**80])}"
                    for label in r.sample("abcdijk", r.randint(1, 6)))


def _equation(r: random.Random) -> str:
    if r.random() < 0.3:
        return "".join(r.choice(_LABELS) for _ in range(r.randint(0, 12)))
    terms = ["".join(r.sample("abcdijk", r.randint(0, 3))) for _ in range(r.randint(1, 4))]
    text = ",".join(terms)
    if r.random() < 0.7:
        labels = sorted(set("".join(terms)))
        text += "->" + "".join(r.sample(labels, r.randint(0, min(2, len(labels)))))
    return text


def _case_file(r: random.Random, tmp: Path, number: int) -> str:
    choice = r.random()
    case = {"name": r.choice(["a", "", 3, "[/x]", "[bold]b"]), "equation": _equation(r),
            r.choice(["shapes", "sizes", "sizez"]): r.choice([_shape_text(r), _sizes_text(r),
                                                            [[2, 3]], {"a": 2}, None])}
    if r.random() < 0.3:
        case[r.choice(["memory_limt", "budgets", "grad", "device", "repeats"])] = r.choice(
            ["1KiB", {"max_peak": "x"}, [0], "cpu", 0, None])
    if choice < 0.3:
        text = json.dumps({"cases": [case]}, default=str)
        path = tmp / f"c{number}.json"
    elif choice < 0.5:
        text = r.choice(["[" * 5000, "{", '{"cases": []}', "9" * 6000, "[" * 3000 + "]" * 3000])
        path = tmp / f"c{number}.json"
    else:
        text = r.choice(["[[cases]]\nname='a'\nequation='ab->'\nshapes='2x3'\n",
                         "x = [" * 2000, "[[cases]]\nname=1", "a = " + "9" * 5000, ""])
        path = tmp / f"c{number}.toml"
    path.write_text(text, encoding="utf-8")
    return str(path)


def _report_file(r: random.Random, tmp: Path, number: int) -> str:
    forward = {"flops": r.choice([1, "abc", None, 1e308, -1]),
               "peak_bytes": r.choice([8, "x", 10**30])}
    data = r.choice([
        {"schema_version": 2, "forward": forward, "strategies": r.choice([[], "x", [1]]),
         "runs": r.choice([[], [{"strategy": "reverse", "forward_s": {"median": "x"}}]])},
        {"schema_version": r.choice([0, 1, 3, "2", True]), "forward": {}},
        {"schema_version": 2, "cases": r.choice([[], [{"name": "a"}], "x", [1]])},
        [1, 2],
    ])
    path = tmp / f"r{number}.json"
    path.write_text(json.dumps(data) if r.random() < 0.9 else "[" * 4000, encoding="utf-8")
    return str(path)


def _arguments(r: random.Random, tmp: Path, number: int) -> list[str]:
    kind = r.random()
    if kind < 0.1:
        return ["compare", _report_file(r, tmp, number), _report_file(r, tmp, number + 10**6),
                *r.choice([[], ["--tolerance", r.choice(["0", "-1", "abc", "nan"])]])]
    if kind < 0.2:
        return ["--cases", _case_file(r, tmp, number), "--device", "none"]
    if kind < 0.6:  # a valid equation with every size, and a few random options
        terms = ["".join(r.sample("abcdijk", r.randint(0, 3))) for _ in range(r.randint(1, 5))]
        labels = sorted(set("".join(terms)))
        output = "".join(r.sample(labels, r.randint(0, min(2, len(labels)))))
        sizes = ",".join(f"{label}={r.choice([1, 2, 3, 10**6, 10**9])}" for label in labels)
        args = [",".join(terms) + "->" + output] + (["--sizes", sizes] if labels else
                                                   ["--shapes", ",".join("()" for _ in terms)])
        for name in r.sample(sorted(_OPTIONS), r.randint(0, 2)):
            if name not in ("--shapes", "--sizes"):
                args += [name, _OPTIONS[name](r)]
        args += [flag for flag in _FLAGS if r.random() < 0.05]
        return [*args, "--device", "none", *r.choice([[], ["--json", "-"]])]
    args = [_equation(r)] if r.random() < 0.95 else []
    for name in r.sample(sorted(_OPTIONS), r.randint(1, 5)):
        args += [name, _OPTIONS[name](r)]
    if r.random() < 0.5 and "--shapes" not in args and "--sizes" not in args:
        args += ["--sizes", _sizes_text(r)]
    args += [flag for flag in _FLAGS if r.random() < 0.05]
    args += ["--device", "none"]
    if r.random() < 0.3:
        args += ["--json", "-"]
    return args


def test_cli_fuzz_never_crashes(tmp_path: Path) -> None:
    r = random.Random(SEED)
    for number, text in enumerate(_ROOFLINE_TEXTS):
        path = tmp_path / f"profile{number}.json"
        path.write_text(text, encoding="utf-8")
        _ROOFLINE_FILES.append(str(path))
    runner = CliRunner()
    exits: dict[int, int] = {}
    for number in range(COUNT):
        args = _arguments(r, tmp_path, number)
        result = runner.invoke(cli, args, catch_exceptions=True)
        if result.exception is not None and not isinstance(result.exception, SystemExit):
            raise AssertionError(f"einsum-analyze {args!r} crashed") from result.exception
        assert result.exit_code in (0, 1, 2), (args, result.exit_code, result.stderr)
        if result.exit_code == 2 and "--cases" in args and result.stdout:
            # A batch reports each case that failed, one line each, beside its table.
            assert all(line.startswith(("Error: case ", "Budget exceeded: "))
                       for line in result.stderr.strip().splitlines()), (args, result.stderr)
        elif result.exit_code == 2:
            lines = result.stderr.strip().splitlines()
            assert len(lines) == 1 and lines[0].startswith("Error: "), (args, result.stderr)
            assert result.stdout == "", (args, result.stdout[:200])
        exits[result.exit_code] = exits.get(result.exit_code, 0) + 1
    # The inputs reach the analysis, not only the option parser.
    assert exits.get(0, 0) > COUNT // 5, exits
    assert exits.get(2, 0) > COUNT // 4, exits
