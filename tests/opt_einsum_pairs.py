"""The (equation, shapes) pairs that opt_einsum's own test suite plans, as data.

Read from opt_einsum 3.4's ``opt_einsum/tests`` (test_contract.py, test_paths.py,
test_edge_cases.py, test_input.py, test_sharing.py, test_blas.py): every equation that a test there
contracts or plans, with the shapes that test gives it. Tests built from
``opt_einsum.testing.build_shapes`` without sizes use its default size of each label
(:data:`DEFAULT_SIZES`); those built from ``rand_equation`` keep its arguments here and
are generated with it. A pair that several tests share is listed once.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from corpus import OPT_EINSUM_EQUATIONS

__all__ = ["PAIRS", "Pair"]

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


def _sized(equation: str, sizes: dict[str, int] | None = None) -> tuple[tuple[int, ...], ...]:
    table = DEFAULT_SIZES if sizes is None else sizes
    lhs = equation.split("->")[0]
    return tuple(tuple(table[char] for char in term) for term in lhs.split(","))


# test_contract.py's contract_expression tests with constants.
_CONSTANTS = (
    "hbc,bdef,cdkj,ji,ikeh,lfo", "bdef,cdkj,ji,ikeh,hbc,lfo", "ijab,acd,bce,df,ef->ji",
    "ab,cd,ad,cb", "ab,bc,cd",
)

# test_sharing.py's ``equations``, and test_input.py's ellipsis-free ones.
_SHARING = ("ab,bc->ca", "abc,bcd,dea", "abc,def->fedcba", "abc,bcd,df->fa", "ijk,ikj",
            "i,j->ij", "ijk,k->ij", "AB,BC->CA", "a,b")

# test_blas.py's pairwise contractions (inputs and output of ``blas_tests``).
_BLAS = (
    "k,k->", "ijk,ijk->", "ij,jk->ik", "ijl,jlk->ik", "ij,kj->ik", "ijl,kjl->ik", "ji,jk->ik",
    "jli,jlk->ik", "ji,kj->ik", "jli,kjl->ik", "ij,jk->ki", "ijl,jlk->ki", "ij,kj->ki",
    "ijl,kjl->ki", "ji,jk->ki", "jli,jlk->ki", "ji,kj->ki", "jli,kjl->ki", "ilj,jlk->ik",
    "ijl,ljk->ik", "ilj,kjl->ik", "ijl,klj->ik", "lji,jlk->ik", "jli,ljk->ik", "ijk,ikj->",
    "i,j->ij", "ijk,ik->j", "ijj,jk->ik", "ijk,j->ij", "ij,ij->ij",
)

# test_paths.py: the path edge and scalar cases, the memory-limited ones.
_PATHS = (",a,->a", ",,a,->a", "abc,bdef,fghj,cem,mhk,ljk->adgl")


def _random_pairs() -> list[Pair]:
    """The pairs opt_einsum's tests draw with ``rand_equation`` (its own generator)."""
    from opt_einsum.testing import rand_equation

    pairs = []
    # test_contract.py::test_rand_equation
    for n, reg, n_out, global_dim in itertools.product((4, 5), (2, 3), (0, 2, 4),
                                                       (False, True)):
        equation, shapes = rand_equation(n, reg, n_out, d_min=2, d_max=5, seed=42,
                                         global_dim=global_dim)
        pairs.append(Pair(f"rand-{n}-{reg}-{n_out}-{int(global_dim)}", equation,
                          tuple(map(tuple, shapes))))
    # test_paths.py's dynamic-programming tests
    for n, reg, seed in ((10, 4, 43), (5, 3, 42), (10, 3, 42)):
        equation, shapes = rand_equation(n, reg, seed=seed)
        pairs.append(Pair(f"rand-{n}-{reg}-seed{seed}", equation, tuple(map(tuple, shapes))))
    return pairs


def _chain(symbols: int) -> Pair:
    """test_paths.py::test_large_path: a chain of matrices over opt_einsum's symbols."""
    from opt_einsum import get_symbol

    labels = "".join(get_symbol(i) for i in range(symbols))
    sizes = dict(zip(labels, itertools.cycle((2, 3, 4)), strict=False))
    equation = ",".join(labels[t:t + 2] for t in range(symbols - 1))
    return Pair(f"chain{symbols}", equation, _sized(equation, sizes))


def _pairs() -> tuple[Pair, ...]:
    # test_contract.py's ``tests`` (tests/corpus.py holds them): run with every optimizer.
    pairs = [Pair("contract", eq, _sized(eq)) for eq in dict.fromkeys(OPT_EINSUM_EQUATIONS)]
    pairs += [Pair("constants", eq, _sized(eq)) for eq in _CONSTANTS]
    pairs += [Pair("sharing", eq, _sized(eq)) for eq in _SHARING]
    pairs += [Pair("blas", eq, _sized(eq)) for eq in _BLAS]
    pairs += [Pair("paths", eq, _sized(eq)) for eq in _PATHS]
    pairs += [
        # test_paths.py: GEMM1 and Inner1 of explicit_path_tests, as equations.
        Pair("paths", "abd,ac,bdc->", _sized("abd,ac,bdc", {"a": 1, "b": 2, "c": 3, "d": 4})),
        Pair("paths", "abcd,abc,bc->",
             _sized("abcd,abc,bc", {"a": 5, "b": 2, "c": 3, "d": 4})),
        Pair("paths", "abc,bdef,fghj,cem,mhk,ljk->adgl",
             _sized("abc,bdef,fghj,cem,mhk,ljk"), memory_limit=5),
        Pair("paths", "a,ac,ab,ad,cd,bd,bc->", _sized("a,ac,ab,ad,cd,bd,bc", dict.fromkeys(
            "abcd", 20)), memory_limit="max_input"),
        Pair("paths", "abc,cfd,dbe,efa", _sized("abc,cfd,dbe,efa", {
            "a": 20, "b": 20, "c": 20, "d": 20, "e": 20, "f": 20}), memory_limit="max_input"),
        Pair("paths", "nlp,nlq,pl->n", ((1, 1, 1), (1, 1, 1), (1, 1))),
        Pair("paths", "a,bcd,efg->", ((2,), (2, 2, 2), (2, 2, 2))),
        Pair("paths", "a,b,abc->c", ((2,), (2,), (2, 2, 3))),
        Pair("paths", "ab,cd,ef,fg", ((10, 10), (10, 10), (10, 10), (10, 2))),
        # test_edge_cases.py: size-1 dimensions that broadcast.
        Pair("edge", "ijk,kl,jl", ((1, 5, 4), (4, 6), (5, 6))),
        Pair("edge", "ijk,kl,jl,i->i", ((1, 5, 4), (4, 6), (5, 6), (10,))),
        Pair("edge", "abjk,kl,jl", ((1, 1, 5, 4), (4, 6), (5, 6))),
        Pair("edge", "abjk,kl,jl,ab->ab", ((1, 1, 5, 4), (4, 6), (5, 6), (7, 7))),
        Pair("edge", "ajk,kbl,jl,ab->ab", ((1, 5, 4), (4, 1, 6), (5, 6), (7, 7))),
        Pair("edge", "obk,ijk->ioj", ((2, 4, 8), (2, 4, 8))),
        Pair("edge", "ab,bc,bd->acd", ((5, 4), (1, 5), (4, 20))),
        Pair("edge", "ab,bc->ac", ((2, 2), (2, 2))),
        # test_input.py: singleton broadcasting.
        Pair("input", "ij,ij->j", ((10, 2), (1, 2))),
        Pair("input", "...ij,...jk->...ik", ((1, 5), (5, 5))),
    ]
    pairs += _random_pairs()
    pairs += [_chain(n) for n in (2, 3, 26, 52, 116, 300)]
    return tuple(pairs)


PAIRS: tuple[Pair, ...] = _pairs()
assert len({str(pair) for pair in PAIRS}) == len(PAIRS), "pairs are listed once"
