"""Record the (equation, shapes) pairs that opt_einsum's own test suite plans.

Runs the tests that ship inside the installed opt_einsum (``opt_einsum/tests``) under
pytest, with ``contract_path`` wrapped so that every call is written down: the equation as
the test typed it, the shapes of its operands, the memory limit it gave, and the test.
``contract``, ``contract_expression`` and the sharing helpers all plan through
``contract_path``, so one wrapper sees every pair a test contracts or plans. A pair is kept
once, under the first test that planned it; opt_einsum's parsed form of the equation
(implicit output made explicit, ``...`` expanded) decides what "the same" is.

Calls that opt_einsum rejects as bad input are kept apart (``rejected``); a call that
failed for another reason (an optimizer reused on a second equation, an unknown optimizer
name) is kept as a pair when the same equation plans with ``greedy``.

Usage, from the repository root::

    python tests/opt_einsum_pairs_record.py            # rewrites tests/opt_einsum_pairs.json
    python tests/opt_einsum_pairs_record.py --out FILE

The file this writes is data; ``tests/opt_einsum_pairs.py`` reads it.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import tempfile
import threading
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

DEFAULT_OUT = Path(__file__).with_name("opt_einsum_pairs.json")


def _limit(value: Any) -> int | str | None:
    """The memory limit a test gave, as JSON: None for no limit (None or -1)."""
    if value is None or (isinstance(value, int | Decimal) and int(value) == -1):
        return None
    return value if isinstance(value, str) else int(value)


class _Recorder:
    """A pytest plugin: wraps contract_path while opt_einsum's tests run."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []
        self._local = threading.local()
        self._test = ""

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item) -> Any:
        file, _, name = item.nodeid.partition("::")
        self._test = f"{Path(file).name}::{name.split('[')[0]}"
        yield

    def pytest_sessionstart(self) -> None:
        import opt_einsum
        from opt_einsum import parser

        contract_module = sys.modules["opt_einsum.contract"]
        original_plan, original_parse = contract_module.contract_path, parser.parse_einsum_input
        local, calls = self._local, self.calls

        def contract_path(subscripts: Any, *operands: Any, **kwargs: Any) -> Any:
            local.call = {"typed": subscripts if isinstance(subscripts, str) else None,
                          "memory_limit": _limit(kwargs.get("memory_limit")),
                          "test": self._test}
            first = len(calls)
            try:
                return original_plan(subscripts, *operands, **kwargs)
            except (ValueError, KeyError, RuntimeError, TypeError) as err:
                for call in calls[first:first + 1]:
                    call["error"] = type(err).__name__
                raise
            finally:
                local.call = None

        def parse_einsum_input(operands: Any, shapes: bool = False) -> Any:
            parsed = original_parse(operands, shapes=shapes)
            call = getattr(local, "call", None)
            if call is not None:
                inputs, output, prepared = parsed
                sizes = [p if shapes else parser.get_shape(p) for p in prepared]
                calls.append(dict(call, parsed=f"{inputs}->{output}",
                                  shapes=[[int(d) for d in shape] for shape in sizes]))
                local.call = None  # the first parse of a call is the user's equation
            return parsed

        contract_module.contract_path = contract_path
        opt_einsum.contract_path = contract_path
        parser.parse_einsum_input = parse_einsum_input
        self._restore = (contract_module, opt_einsum, parser, original_plan, original_parse)

    def pytest_sessionfinish(self) -> None:
        contract_module, opt_einsum, parser, original_plan, original_parse = self._restore
        contract_module.contract_path = original_plan
        opt_einsum.contract_path = original_plan
        parser.parse_einsum_input = original_parse


def _plans(equation: str, shapes: list[list[int]]) -> bool:
    import opt_einsum

    try:
        opt_einsum.contract_path(equation, *shapes, shapes=True, optimize="greedy")
    except ValueError:
        return False
    return True


def collect(calls: list[dict[str, Any]]) -> dict[str, Any]:
    """The recorded calls as the data file's document: pairs, limited pairs, rejected."""
    pairs: dict[tuple[str, str], dict[str, Any]] = {}
    limited: dict[tuple[str, str, str], dict[str, Any]] = {}
    rejected: dict[tuple[str, str], dict[str, Any]] = {}
    for call in calls:
        equation = call["typed"] if call["typed"] is not None else call["parsed"]
        shapes_key = json.dumps(call["shapes"])
        entry = {"equation": equation, "shapes": call["shapes"], "test": call["test"]}
        if "error" in call and not _plans(call["parsed"], call["shapes"]):
            rejected.setdefault((equation, shapes_key), entry)
            continue
        pairs.setdefault((call["parsed"], shapes_key), entry)
        if call["memory_limit"] is not None:
            limited.setdefault((call["parsed"], shapes_key, str(call["memory_limit"])),
                               dict(entry, memory_limit=call["memory_limit"]))
    import opt_einsum

    return {"opt_einsum": opt_einsum.__version__,
            "pairs": list(pairs.values()),
            "memory_limited": list(limited.values()),
            "rejected": list(rejected.values())}


def dumps(document: dict[str, Any]) -> str:
    """The document as JSON with one entry a line, so that a change reads as a short diff."""
    parts = [f' "opt_einsum": {json.dumps(document["opt_einsum"])}']
    for key in ("pairs", "memory_limited", "rejected"):
        rows = ",\n".join("  " + json.dumps(entry, sort_keys=True) for entry in document[key])
        parts.append(f' "{key}": [\n{rows}\n ]')
    return "{\n" + ",\n".join(parts) + "\n}\n"


def record() -> dict[str, Any]:
    """Run opt_einsum's installed tests and return what they planned."""
    spec = importlib.util.find_spec("opt_einsum.tests")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("this opt_einsum ships no tests (opt_einsum.tests)")
    tests_dir = list(spec.submodule_search_locations)[0]
    recorder = _Recorder()
    sys.dont_write_bytecode = True  # nothing written into the installed package
    with tempfile.TemporaryDirectory() as root:
        config = Path(root, "pytest.ini")
        config.write_text("[pytest]\n")
        code = pytest.main([tests_dir, "-q", "-p", "no:cacheprovider", "-c", str(config),
                            "--rootdir", root, "-W", "ignore"], plugins=[recorder])
    if code != pytest.ExitCode.OK:
        raise SystemExit(f"opt_einsum's tests did not all pass (pytest exit code {code})")
    return collect(recorder.calls)


def main() -> None:
    options = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    options.add_argument("--out", type=Path, default=DEFAULT_OUT)
    out = options.parse_args().out
    document = record()
    out.write_text(dumps(document))
    print(f"{len(document['pairs'])} pairs, {len(document['memory_limited'])} with a memory "
          f"limit, {len(document['rejected'])} rejected -> {out}", file=sys.stderr)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONDONTWRITEBYTECODE", "1")
    main()
