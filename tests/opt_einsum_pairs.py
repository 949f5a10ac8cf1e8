"""The (equation, shapes) pairs that opt_einsum's own test suite plans, as data.

``tests/opt_einsum_pairs.json`` holds every pair that the tests shipped with opt_einsum 3.4
pass to ``contract_path`` (directly, or through ``contract``, ``contract_expression`` and
the sharing helpers), recorded by running that suite (``tests/opt_einsum_pairs_record.py``
writes the file; a slow test checks that it is current). It counts, after opt_einsum's own
parsing, 454 distinct pairs:

- test_sharing.py 237 (210 of them from ``test_chain_2_growth``: chains of 1 to 20 2x2
  matrices, each contracted to every pair of neighbouring labels);
- test_contract.py 158 (its ``tests`` list with build_shapes' sizes, the same list in Greek
  letters, ``rand_equation`` cases, constants);
- test_paths.py 24, test_input.py 14, test_edge_cases.py 10, test_backends.py 9 and
  test_blas.py 2 (test_parser.py plans none).

Beside those, :data:`PAIRS` holds:

- the memory-limited plans of test_paths.py, each with its limit (:data:`MEMORY_LIMITED`);
- the two plans the recording cannot see (:data:`UNRECORDED`): ``GEMM1``, which
  test_paths.py hands to the path functions without ``contract_path``, and the one of
  test_backends.py's gradient tests, skipped here without jax or autograd;
- pairs of our own built from the suite's lists (:data:`OURS`): test_blas.py's pairwise
  equations, which it checks with ``can_blas`` alone, at build_shapes' sizes; the
  ``Inner1`` case of test_paths.py, which no test there uses; ``rand_equation`` with a
  global dimension, which test_contract.py names as a parameter but does not pass.

:data:`REJECTED` holds the pairs opt_einsum refuses as bad input (test_input.py).
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass
from pathlib import Path

__all__ = ["MEMORY_LIMITED", "OURS", "PAIRS", "REJECTED", "SUITE", "UNRECORDED", "Pair"]

DATA = Path(__file__).with_name("opt_einsum_pairs.json")

DEFAULT_SIZES = dict(zip("abcdefghijklmopqABC",
                         (2, 3, 4, 5, 4, 3, 2, 6, 5, 4, 3, 2, 5, 7, 4, 3, 2, 3, 4), strict=True))
"""opt_einsum.testing's size of each label when a test gives none."""


@dataclass(frozen=True)
class Pair:
    """One equation with its operand shapes, and where opt_einsum's tests use it."""

    source: str
    equation: str
    shapes: tuple[tuple[int, ...], ...]
    memory_limit: int | str | None = None

    def __str__(self) -> str:
        limit = "" if self.memory_limit is None else f"@{self.memory_limit}"
        return f"{self.source}:{self.equation}{limit}"


def _source(test: str) -> str:
    """``test_paths.py::test_large_path`` -> ``paths.large_path``."""
    file, _, name = test.partition("::")
    return f"{file.removeprefix('test_').removesuffix('.py')}.{name.removeprefix('test_')}"


def _read(section: str) -> tuple[Pair, ...]:
    entries = json.loads(DATA.read_text())[section]
    return tuple(Pair(_source(entry["test"]), entry["equation"],
                      tuple(tuple(shape) for shape in entry["shapes"]),
                      entry.get("memory_limit")) for entry in entries)


def _sized(equation: str, sizes: dict[str, int] | None = None) -> tuple[tuple[int, ...], ...]:
    table = DEFAULT_SIZES if sizes is None else sizes
    lhs = equation.split("->")[0]
    return tuple(tuple(table[char] for char in term) for term in lhs.split(","))


SUITE: tuple[Pair, ...] = _read("pairs")
"""Every distinct (equation, shapes) pair that opt_einsum's shipped tests plan."""

MEMORY_LIMITED: tuple[Pair, ...] = _read("memory_limited")
"""The suite's pairs planned under a memory limit, each with that limit."""

REJECTED: tuple[Pair, ...] = _read("rejected")
"""The pairs that opt_einsum's tests expect contract_path to refuse."""

UNRECORDED: tuple[Pair, ...] = (
    Pair("paths.path_optimal", "abd,ac,bdc->",
         _sized("abd,ac,bdc", {"a": 1, "b": 2, "c": 3, "d": 4})),
    Pair("backends.autograd_gradient", "ij,jk,kl->", ((2, 3), (3, 4), (4, 2))),
)
"""What test_paths.py plans without contract_path, and a test skipped without jax/autograd."""

# test_blas.py's ``blas_tests``: pairwise contractions (inputs and output).
_BLAS = (
    "k,k->", "ijk,ijk->", "ij,jk->ik", "ijl,jlk->ik", "ij,kj->ik", "ijl,kjl->ik", "ji,jk->ik",
    "jli,jlk->ik", "ji,kj->ik", "jli,kjl->ik", "ij,jk->ki", "ijl,jlk->ki", "ij,kj->ki",
    "ijl,kjl->ki", "ji,jk->ki", "jli,jlk->ki", "ji,kj->ki", "jli,kjl->ki", "ilj,jlk->ik",
    "ijl,ljk->ik", "ilj,kjl->ik", "ijl,klj->ik", "lji,jlk->ik", "jli,ljk->ik", "ijk,ikj->",
    "i,j->ij", "ijk,ik->j", "ijj,jk->ik", "ijk,j->ij", "ij,ij->ij",
)


def _global_dim_pairs() -> list[Pair]:
    """test_rand_equation's cases, drawn with the global dimension it names."""
    from opt_einsum.testing import rand_equation

    pairs = []
    for n, reg, n_out in itertools.product((4, 5), (2, 3), (0, 2, 4)):
        equation, shapes = rand_equation(n, reg, n_out, d_min=2, d_max=5, seed=42,
                                         global_dim=True)
        pairs.append(Pair(f"ours.rand-{n}-{reg}-{n_out}-global", equation,
                          tuple(map(tuple, shapes))))
    return pairs


def _ours() -> tuple[Pair, ...]:
    pairs = [Pair("ours.blas", eq, _sized(eq)) for eq in _BLAS]
    pairs.append(Pair("ours.inner1", "abcd,abc,bc->",
                      _sized("abcd,abc,bc", {"a": 5, "b": 2, "c": 3, "d": 4})))
    pairs += _global_dim_pairs()
    suite = {(pair.equation, pair.shapes) for pair in SUITE}
    return tuple(pair for pair in pairs if (pair.equation, pair.shapes) not in suite)


OURS: tuple[Pair, ...] = _ours()
"""Pairs of our own, from the suite's lists; not planned by the suite itself."""

PAIRS: tuple[Pair, ...] = SUITE + MEMORY_LIMITED + UNRECORDED + OURS
assert len({(p.equation, p.shapes, p.memory_limit) for p in PAIRS}) == len(PAIRS), \
    "pairs are listed once"
