"""A categorised corpus of einsum equations, shared by the test files.

Every case is an equation with operand shapes. Categories:

- ``scalar``, ``hadamard``, ``gemm`` (matrix and batched products), ``diagonal`` (traces and
  repeated indices), ``outer``, ``private`` (an index only one operand has), ``broadcast``
  (size-1 dimensions), ``ellipsis``, ``implicit`` (no ``->``), ``uppercase``;
- ``opt_einsum``: the equations of opt_einsum's own ``tests/test_contract.py``, with
  shapes from :func:`label_size`;
- ``bench``: the public benchmark cases of ``benchmarks/cases.json``, repeated here (a
  test checks that the two agree; some are large: analyse them, do not allocate them);
- ``regression``: every shrunk hypothesis failure and every fixed bug, tagged with its
  issue id.

This module does not import einsum_analyze.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from einsum_analyze import parse_equation, plan_contraction
from einsum_analyze.model.planning import Plan

__all__ = [
    "CASES",
    "CATEGORIES",
    "Case",
    "by_category",
    "by_name",
    "label_size",
    "make_operands",
    "small_cases",
]


@dataclass(frozen=True)
class Case:
    """One corpus equation.

    Attributes:
        name: Unique id, used as the pytest parameter id.
        category: One of :data:`CATEGORIES`.
        equation: The einsum as a user writes it.
        shapes: One shape per operand.
    """

    name: str
    category: str
    equation: str
    shapes: tuple[tuple[int, ...], ...]

    @property
    def input_elements(self) -> int:
        """Total elements of the operands."""
        return sum(math.prod(shape) for shape in self.shapes)

    def __str__(self) -> str:
        return self.name


def label_size(label: str) -> int:
    """The deterministic size of a label for generated shapes: 2, 3 or 4."""
    return 2 + (ord(label) % 3)


def _auto(equation: str) -> tuple[tuple[int, ...], ...]:
    """Shapes for an equation without '...' from :func:`label_size`."""
    lhs = equation.replace(" ", "").split("->")[0]
    return tuple(tuple(label_size(c) for c in term) for term in lhs.split(","))


def _c(name: str, category: str, equation: str, *shapes: tuple[int, ...]) -> Case:
    return Case(name, category, equation, tuple(tuple(s) for s in shapes))


_HAND: list[Case] = [
    # scalar operands and scalar outputs
    _c("scalar-times-vector", "scalar", "a,->a", (3,), ()),
    _c("scalar-times-matrix", "scalar", "ab,->ab", (2, 3), ()),
    _c("scalars-around-matrix", "scalar", ",ab,->ab", (), (2, 3), ()),
    _c("three-scalars", "scalar", ",,->", (), (), ()),
    _c("scalar-identity", "scalar", "->", ()),
    _c("vector-sum", "scalar", "i->", (5,)),
    _c("inner-product", "scalar", "i,i->", (5,), (5,)),
    # element-wise products
    _c("hadamard-2", "hadamard", "ij,ij->ij", (3, 4), (3, 4)),
    _c("hadamard-3", "hadamard", "ijk,ijk,ijk->ijk", (2, 3, 4), (2, 3, 4), (2, 3, 4)),
    _c("hadamard-mixed-rank", "hadamard", "a,ab,abc->abc", (2,), (2, 3), (2, 3, 4)),
    _c("hadamard-transposed", "hadamard", "ij,ji->ij", (3, 4), (4, 3)),
    # matrix and batched products
    _c("gemm", "gemm", "ij,jk->ik", (3, 4), (4, 5)),
    _c("gemm-transposed-out", "gemm", "ij,jk->ki", (3, 4), (4, 5)),
    _c("gemv", "gemm", "ij,j->i", (3, 4), (4,)),
    _c("batched-gemm", "gemm", "bij,bjk->bik", (2, 3, 4), (2, 4, 5)),
    _c("chain-3", "gemm", "ij,jk,kl->il", (3, 4), (4, 5), (5, 2)),
    _c("chain-4", "gemm", "ab,bc,cd,de->ae", (2, 3), (3, 4), (4, 5), (5, 2)),
    _c("attention-small", "gemm", "bhqd,bhkd,bhkv->bhqv", (2, 2, 3, 4), (2, 2, 5, 4),
       (2, 2, 5, 3)),
    _c("readme", "gemm", "bc,bd,cm,mdn->bn", (512, 2), (512, 2), (2, 7), (7, 2, 7)),
    # traces and repeated indices
    _c("trace", "diagonal", "ii->", (4, 4)),
    _c("diagonal", "diagonal", "ii->i", (4, 4)),
    _c("diag-then-outer", "diagonal", "ijj,k->ik", (2, 3, 3), (4,)),
    _c("diag-in-product", "diagonal", "iij,jk->ik", (3, 3, 4), (4, 2)),
    _c("double-trace", "diagonal", "ijji->", (2, 3, 3, 2)),
    _c("triple-diagonal", "diagonal", "iii->i", (3, 3, 3)),
    _c("diag-both", "diagonal", "aab,bcc->ac", (2, 2, 3), (3, 4, 4)),
    # outer products
    _c("outer-2", "outer", "i,j->ij", (3,), (4,)),
    _c("outer-3", "outer", "ab,cd,ef->abcdef", (2, 2), (3, 3), (2, 4)),
    _c("outer-then-reduce", "outer", "i,j,ij->", (3,), (4,), (3, 4)),
    # indices held by one operand only, not in the output
    _c("private-sum", "private", "ij,k->i", (3, 4), (5,)),
    _c("private-both", "private", "ab,cd->ad", (2, 3), (4, 5)),
    _c("private-in-chain", "private", "abx,bc,cy->a", (2, 3, 4), (3, 2), (2, 5)),
    # size-1 dimensions broadcasting against larger ones
    _c("broadcast-vector", "broadcast", "ij,j->i", (3, 4), (1,)),
    _c("broadcast-rows", "broadcast", "ij,ij->ij", (1, 4), (3, 4)),
    _c("broadcast-both-ways", "broadcast", "ij,ij->ij", (1, 4), (3, 1)),
    _c("broadcast-diagonal", "broadcast", "ii,i->i", (1, 1), (3,)),
    _c("broadcast-all-ones", "broadcast", "ij,jk->ik", (1, 1), (1, 1)),
    _c("broadcast-contracted", "broadcast", "ij,jk->ik", (3, 1), (4, 5)),
    # ellipsis
    _c("ellipsis-batched-gemm", "ellipsis", "...ij,...jk->...ik", (8, 1, 3, 4), (1, 4, 4, 2)),
    _c("ellipsis-leading-sum", "ellipsis", "i...->...", (2, 3, 4)),
    _c("ellipsis-identity", "ellipsis", "...->...", (2, 3)),
    _c("ellipsis-scalar", "ellipsis", "...->...", ()),
    _c("ellipsis-dropped", "ellipsis", "...ij->ij", (2, 3, 4)),
    _c("ellipsis-middle", "ellipsis", "a...b,b...->a...", (2, 3, 4), (4, 3)),
    _c("ellipsis-unequal-width", "ellipsis", "...i,...i->...", (2, 3, 4), (3, 4)),
    _c("ellipsis-implicit", "ellipsis", "...ij,...jk", (2, 3, 4), (2, 4, 5)),
    _c("ellipsis-empty", "ellipsis", "...ij,jk->...ik", (3, 4), (4, 5)),
    # implicit output (labels seen once, sorted)
    _c("implicit-gemm", "implicit", "ij,jk", (3, 4), (4, 5)),
    _c("implicit-sorted", "implicit", "ba,ac", (3, 4), (4, 5)),
    _c("implicit-trace", "implicit", "ii", (3, 3)),
    _c("implicit-inner", "implicit", "i,i", (4,), (4,)),
    _c("implicit-diagonal", "implicit", "iij", (3, 3, 2)),
    _c("implicit-spaces", "implicit", " ij , jk ", (3, 4), (4, 5)),
    # upper-case labels
    _c("uppercase-gemm", "uppercase", "IJ,JK->IK", (3, 4), (4, 5)),
    _c("uppercase-mixed", "uppercase", "aA,Ab->ab", (2, 3), (3, 4)),
    _c("uppercase-implicit", "uppercase", "Ab,ba", (2, 3), (3, 4)),
]

# opt_einsum/tests/test_contract.py, the ``tests`` list (opt_einsum 3.4).
OPT_EINSUM_EQUATIONS: tuple[str, ...] = (
    # scalar-like operations
    "a,->a", "ab,->ab", ",ab,->ab", ",,->",
    # hadamard-like products
    "a,ab,abc->abc", "a,b,ab->ab",
    # index transformations
    "ea,fb,gc,hd,abcd->efgh", "ea,fb,abcd,gc,hd->efgh", "abcd,ea,fb,gc,hd->efgh",
    # complex contractions
    "acdf,jbje,gihb,hfac,gfac,gifabc,hfac", "cd,bdhe,aidb,hgca,gc,hgibcd,hgac",
    "abhe,hidj,jgba,hiab,gab", "bde,cdh,agdb,hica,ibd,hgicd,hiac",
    "chd,bde,agbc,hiad,hgc,hgi,hiad", "chd,bde,agbc,hiad,bdi,cgh,agdb",
    "bdhe,acad,hiab,agac,hibd",
    # collapse
    "ab,ab,c->", "ab,ab,c->c", "ab,ab,cd,cd->", "ab,ab,cd,cd->ac", "ab,ab,cd,cd->cd",
    "ab,ab,cd,cd,ef,ef->",
    # outer products
    "ab,cd,ef->abcdef", "ab,cd,ef->acdf", "ab,cd,de->abcde", "ab,cd,de->be",
    "ab,bcd,cd->abcd", "ab,bcd,cd->abd",
    # random cases that previously failed there
    "eb,cb,fb->cef", "dd,fb,be,cdb->cef", "bca,cdb,dbf,afc->", "dcc,fce,ea,dbf->ab",
    "fdf,cdd,ccd,afe->ae", "abcd,ad", "ed,fcd,ff,bcf->be", "baa,dcf,af,cde->be",
    "bd,db,eac->ace", "fff,fae,bef,def->abd", "efc,dbc,acf,fd->abe",
    # inner products
    "ab,ab", "ab,ba", "abc,abc", "abc,bac", "abc,cba",
    # GEMM
    "ab,bc", "ab,cb", "ba,bc", "ba,cb", "abcd,cd", "abcd,ab", "abcd,cdef",
    "abcd,cdef->feba", "abcd,efdc",
    # inner then dot
    "aab,bc->ac", "ab,bcc->ac", "aab,bcc->ac", "baa,bcc->ac", "aab,ccb->ac",
    # randomly built
    "aab,fa,df,ecc->bde", "ecb,fef,bad,ed->ac", "bcf,bbb,fbf,fc->", "bb,ff,be->e",
    "bcb,bb,fc,fff->", "fbb,dfd,fc,fc->", "afd,ba,cc,dc->bf", "adb,bc,fa,cfc->d",
    "bbd,bda,fc,db->acf", "dba,ead,cad->bce", "aef,fbc,dca->bde",
)

_OPT_EINSUM: list[Case] = [
    Case(f"oe{number:02d}:{equation}", "opt_einsum", equation, _auto(equation))
    for number, equation in enumerate(OPT_EINSUM_EQUATIONS)
]

_TN18 = "bc,bd,be,bf,bg,bh,bi,bj,bk,cm,mdn,neo,ofp,pgzq,qhr,ris,sjt,tk->bz"

# The cases of benchmarks/cases.json (test_cases_core checks that the two agree).
_BENCH: list[Case] = [
    _c("tn18-b512", "bench", _TN18, *([(512, 2)] * 9), (2, 7), (7, 2, 7), (7, 2, 7),
       (7, 2, 7), (7, 2, 10, 7), (7, 2, 7), (7, 2, 7), (7, 2, 7), (7, 2)),
    _c("tn18-b65536-bond64", "bench", _TN18, *([(65536, 2)] * 9), (2, 64), (64, 2, 64),
       (64, 2, 64), (64, 2, 64), (64, 2, 10, 64), (64, 2, 64), (64, 2, 64), (64, 2, 64),
       (64, 2)),
    _c("mps-layer", "bench", "ni,nj,nk,nl,aix,xjy,yku,ulv->nav", (4096, 4), (4096, 4),
       (4096, 4), (4096, 4), (8, 4, 128), (128, 4, 128), (128, 4, 128), (128, 4, 16)),
    _c("tucker", "bench", "abc,ai,bj,ck->ijk", (256, 256, 256), (256, 128), (256, 128),
       (256, 128)),
    _c("chain3", "bench", "ij,jk,kl->il", (8192, 256), (256, 8192), (8192, 256)),
    _c("attention3", "bench", "bhqd,bhkd,bhkv->bhqv", (8, 16, 1024, 64), (8, 16, 1024, 64),
       (8, 16, 1024, 64)),
    _c("diag-private", "bench", "ijj,k->ik", (64, 32, 32), (16,)),
    _c("bench-trace", "bench", "ii->", (128, 128)),
    _c("ellipsis-broadcast", "bench", "...ij,...jk->...ik", (8, 1, 32, 64), (1, 4, 64, 16)),
    _c("bench-implicit", "bench", "ba,ac", (16, 8), (8, 4)),
    _c("outer-scalar", "bench", "i,j,ij->", (300,), (200,), (300, 200)),
]

# Shrunk hypothesis failures and fixed bugs: name them "issue-<id>-<what>".
_REGRESSION: list[Case] = []

CASES: tuple[Case, ...] = tuple(_HAND + _OPT_EINSUM + _BENCH + _REGRESSION)
CATEGORIES: tuple[str, ...] = tuple(dict.fromkeys(case.category for case in CASES))

assert len({case.name for case in CASES}) == len(CASES), "corpus names must be unique"


def by_category(*categories: str) -> list[Case]:
    """The cases of the given categories (all cases when none is given)."""
    return [case for case in CASES if not categories or case.category in categories]


def by_name(name: str) -> Case:
    """The case called ``name``."""
    for case in CASES:
        if case.name == name:
            return case
    raise KeyError(name)


def small_cases(max_elements: int = 200_000) -> list[Case]:
    """Cases whose operands are small enough to allocate in a test."""
    return [case for case in CASES if case.input_elements <= max_elements]


def make_operands(
    case: Case, dtype: type | np.dtype = np.float64, seed: int = 0
) -> list[np.ndarray]:
    """Random operands for ``case`` (standard normal; complex dtypes get an imaginary part)."""
    rng = np.random.default_rng(seed)
    arrays = []
    for shape in case.shapes:
        data = rng.standard_normal(shape)
        if np.issubdtype(np.dtype(dtype), np.complexfloating):
            data = data + 1j * rng.standard_normal(shape)
        arrays.append(np.asarray(data, dtype=dtype))
    return arrays


@functools.cache
def corpus_plan(case: Case) -> Plan:
    """The case's forward plan with opt_einsum's ``auto`` (cached: tests reuse it)."""
    return plan_contraction(parse_equation(case.equation, case.shapes))


def runnable_cases(max_input_elements: int, max_flops: int,
                   max_intermediate_elements: int) -> list[Case]:
    """The corpus cases small enough to run a training step of in a test."""
    found = []
    for case in CASES:
        if case.input_elements > max_input_elements:
            continue
        plan = corpus_plan(case)
        if plan.flops <= max_flops and plan.largest_intermediate_elements <= (
                max_intermediate_elements):
            found.append(case)
    return found
