"""PyTorch's own einsum test cases, as data: the equations and operands of its test suite.

Re-expressed from PyTorch's ``test/test_linalg.py`` (``test_einsum``,
``test_einsum_sublist_format``, ``test_einsum_random``, ``test_einsum_corner_cases``,
``test_einsum_error_cases``) and the einsum OpInfo samples
(``torch.testing._internal.common_methods_invocations.sample_inputs_einsum``): each case
is the arguments of one ``torch.einsum`` call, built from operand specs, so that a test
can run the same call through torch.einsum, the drop-in and ``patch()``. The random
cases come from a generator of our own with fixed seeds, in the spirit of
``test_einsum_random`` (random labels, repeated labels, ellipses, size-1 broadcasting,
implicit and explicit outputs, both call formats).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

Build = Callable[[torch.Generator, torch.dtype], torch.Tensor]


def tensor(*shape: int) -> Build:
    """A contiguous random operand."""
    return lambda g, dtype: torch.randn(shape, generator=g, dtype=dtype)


def noncontiguous(*shape: int) -> Build:
    """An operand of ``shape`` whose last dimension has stride 2."""
    def build(g: torch.Generator, dtype: torch.dtype) -> torch.Tensor:
        wide = torch.randn((*shape[:-1], 2 * shape[-1]), generator=g, dtype=dtype)
        return wide[..., ::2]
    return build


def transposed(*shape: int) -> Build:
    """The transpose of a contiguous operand of ``shape`` (``A.t()``)."""
    return lambda g, dtype: torch.randn(shape, generator=g, dtype=dtype).t()


def sliced(build: Build, index: tuple[Any, ...]) -> Build:
    """A strided view ``build(...)[index]``."""
    return lambda g, dtype: build(g, dtype)[index]


def value(data: Any) -> Build:
    """An operand of given values (``torch.tensor(data)``), 0-dim for a number."""
    return lambda g, dtype: torch.tensor(data, dtype=dtype)


@dataclass(frozen=True)
class TorchCase:
    """One torch.einsum call: ``args`` with each operand spec built.

    ``args`` holds, in call order, an equation or sublists (kept as they are) and
    operand builders (:data:`Build`, marked by :func:`callable`), alone or in one list.
    """

    name: str
    args: tuple[Any, ...]
    source: str
    grad: bool = True
    seed: int = 0
    notes: dict[str, Any] = field(default_factory=dict)

    def build(self, dtype: torch.dtype = torch.float64) -> list[Any]:
        """The call's arguments with fresh operands (the same values for the same seed)."""
        g = torch.Generator().manual_seed(self.seed)
        built: list[Any] = []
        for arg in self.args:
            if callable(arg):
                built.append(arg(g, dtype))
            elif isinstance(arg, list) and arg and all(callable(a) for a in arg):
                built.append([a(g, dtype) for a in arg])  # operands given as one list
            else:
                built.append(arg)
        return built

    def __str__(self) -> str:
        return self.name


def _test_einsum() -> list[TorchCase]:
    x, y = tensor(5), tensor(7)
    A, B, C, D = tensor(3, 5), tensor(2, 5), tensor(2, 3, 5), tensor(2, 5, 7)
    E, F, G = tensor(7, 9), tensor(2, 3, 3, 5), tensor(5, 4, 6)
    H, I = tensor(4, 4), tensor(2, 3, 2)  # noqa: E741 - PyTorch's names
    At = transposed(3, 5)
    l, r, w = noncontiguous(5, 10), noncontiguous(5, 20), tensor(15, 10, 20)  # noqa: E741
    calls: list[tuple[str, tuple[Any, ...]]] = [
        ("i->", (x,)), ("i,i->", (x, x)), ("i,i->i", (x, x)), ("i,j->ij", (x, y)),
        ("ij->ji", (A,)), ("ij->j", (A,)), ("ij->i", (A,)), ("ij,ij->ij", (A, A)),
        ("ij,j->i", (A, x)), ("ij,kj->ik", (A, B)), ("ij,ab->ijab", (A, E)),
        ("Aij,Ajk->Aik", (C, D)), ("ijk,jk->i", (C, A)), ("aij,jk->aik", (D, E)),
        ("abCd,dFg->abCFg", (F, G)), ("ijk,jk->ik", (C, A)), ("ijk,jk->ij", (C, A)),
        ("ijk,ik->j", (C, B)), ("ijk,ik->jk", (C, B)),
        ("ii", (H,)), ("ii->i", (H,)), ("iji->j", (I,)),
        ("ngrg...->nrg...", (tensor(2, 1, 3, 1, 4),)),
        ("i...->...", (H,)), ("ki,...k->i...", (At, B)), ("k...,jk->...", (At, B)),
        ("...ik, ...j -> ...ij", (C, x)), ("Bik,k...j->i...j", (C, tensor(5, 3))),
        ("i...j, ij... -> ...ij", (C, tensor(2, 5, 2, 3))),
        ("bn,anm,bm->ba", (l, w, r)),
        ("bn,Anm,bm->bA", (sliced(l, (slice(None), slice(None, None, 2))),
                           sliced(w, (slice(None), slice(None, None, 2),
                                      slice(None, None, 2))),
                           sliced(r, (slice(None), slice(None, None, 2))))),
        ("...,be,b...,beg,gi,bc...->bi...", (A, B, C, D, E, F)),
    ]
    return [TorchCase(f"test_einsum-{k}-{eq.replace(' ', '')}", (eq, *ops), "test_einsum")
            for k, (eq, ops) in enumerate(calls)]


def _test_sublist() -> list[TorchCase]:
    x, y = tensor(5), tensor(7)
    A, B, C = tensor(3, 5), tensor(2, 5), tensor(2, 1, 3, 1, 4)
    At = transposed(3, 5)
    l, r, w = noncontiguous(5, 10), noncontiguous(5, 20), tensor(15, 10, 20)  # noqa: E741
    E = Ellipsis
    calls: list[tuple[Any, ...]] = [
        (x, [0]), (x, [0], []), (x, [0], y, [1]), (x, [0], y, [1], [0, 1]),
        (A, [0, 1], [1, 0]), (A, [0, 1], x, [1], [0]), (A, [0, 1], B, [2, 1]),
        (A, [0, 1], B, [2, 1], [0, 2]),
        (C, [0, 1, 2, 1, E], [0, 2, 1, E]),
        (At, [0, 1], B, [E, 0]), (At, [0, 1], B, [E, 0], [1, E]),
        (At, [0, E], B, [1, 0], [E]),
        (l, [40, 41], w, [2, 41, 50], r, [40, 50], [40, 2]),
    ]
    return [TorchCase(f"sublist-{k}", tuple(call), "test_einsum_sublist_format")
            for k, call in enumerate(calls)]


def _test_corner_cases() -> list[TorchCase]:
    calls: list[tuple[Any, ...]] = [
        (" ", 1.0), (" -> ", 1.0), (" , ", 2.0, 2.0), (" , , ", 2.0, 2.0, 2.0),
        (" , -> ", 2.0, 2.0), (" i ", [1.0]), (" i -> ", [1.0]), (" i -> i ", [1.0]),
        (" i , i ", [2.0], [2.0]), (" i , i -> i ", [2.0], [2.0]),
        ("i", []), (" i j -> j", [[], []]), ("ij->i", [[], []]),
        (" i j k  ,  k  -> i j ", (3, 0, 6), (6,)),
        ("i,j", [2.0], [1.0, 2.0]), ("i,ij->ij", [1.0, 2.0], [[1.0, 2.0, 3.0], [2.0, 3.0, 4.0]]),
        ("...", 1.0), ("...->", 1.0), ("...->...", 1.0), ("...", [1.0]), ("...->", [1.0]),
        ("z...->z", [1.0]), ("Z...->...Z", [1.0]), ("...a->", [[2.0], [4.0]]),
        ("a...b->ab", [[[1.0], [2.0]], [[3.0], [4.0]]]),
    ]
    cases = []
    for k, (equation, *operands) in enumerate(calls):
        built = [tensor(*op) if isinstance(op, tuple) else value(op) for op in operands]
        cases.append(TorchCase(f"corner-{k}-{equation.replace(' ', '_')}", (equation, *built),
                               "test_einsum_corner_cases"))
    return cases


def error_cases() -> list[TorchCase]:
    """The calls PyTorch's ``test_einsum_error_cases`` expects torch.einsum to refuse."""
    x, y = tensor(2), tensor(2, 3)
    calls: list[tuple[Any, ...]] = [
        ("", []), (". ..", [x]), ("... ...", [x]), ("1", [x]), (",", [x]), ("", [x, x]),
        ("", [x]), ("ai", [x]), ("ai...", [x]), ("a->... .", [x]), ("a->..", [x]),
        ("a->1", [x]), ("a->aa", [x]), ("a->i", [x]), ("aa", [y]), ("...,...", [x, y]),
        ("a,a", [x, tensor(3)]), ("a, ba", [x, y]),
    ]
    cases = [TorchCase(f"error-{k}-{eq.replace(' ', '_')}", (eq, list(ops)),
                       "test_einsum_error_cases") for k, (eq, ops) in enumerate(calls)]
    cases += [TorchCase("error-sublist-negative", (x, [-1]), "test_einsum_error_cases"),
              TorchCase("error-sublist-52", (x, [52]), "test_einsum_error_cases")]
    return cases


def opinfo_samples() -> list[TorchCase]:
    """The einsum OpInfo's sample inputs (operands given as one list, as it passes them)."""
    x, y = tensor(3), tensor(4)
    A, B, C, D = tensor(2, 3), tensor(1, 3), tensor(1, 2, 3), tensor(1, 3, 4)
    E, H, I = tensor(4, 4), tensor(3, 3), tensor(1, 3, 1)  # noqa: E741
    samples: list[tuple[str, tuple[Build, ...]]] = [
        ("i->", (x,)), ("i,j->ij", (x, y)), ("ij->i", (A,)), ("ij,kj->ik", (A, B)),
        ("ij,Ab->ijAb", (A, E)), ("aij,ajk->aik", (C, D)), ("aij,jk->aik", (D, E)),
        ("ijk,ik->j", (C, B)), ("iji->j", (I,)), ("i...->...", (H,)),
        ("...ik, ...j -> ij", (C, x)),
    ]
    return [TorchCase(f"opinfo-{k}-{eq.replace(' ', '')}", (eq, *ops), "OpInfo einsum")
            for k, (eq, ops) in enumerate(samples)]


def _sublist(term: Sequence[str], index: dict[str, int]) -> list[Any]:
    return [Ellipsis if c == "..." else index[c] for c in term]


def random_cases(count: int, seed: int) -> list[TorchCase]:
    """Random valid calls from a fixed seed: 1 to 3 operands, both call formats."""
    rng = random.Random(seed)
    cases = []
    while len(cases) < count:
        labels = rng.sample("abcdefgh", rng.randint(1, 5))
        sizes = {c: rng.randint(1, 3) for c in labels}
        ellipsis_shape = tuple(rng.randint(1, 3) for _ in range(rng.randint(0, 2)))
        operands: list[tuple[list[str], tuple[int, ...], bool]] = []
        for _ in range(rng.randint(1, 3)):
            term = [rng.choice(labels) for _ in range(rng.randint(0, 3))]
            with_ellipsis = bool(ellipsis_shape) and rng.random() < 0.4
            shape = [sizes[c] for c in term]
            if with_ellipsis:
                tail = ellipsis_shape[rng.randint(0, len(ellipsis_shape)):]
                broadcast = tuple(1 if rng.random() < 0.3 else n for n in tail)
                at = rng.randint(0, len(term))
                term = [*term[:at], "...", *term[at:]]
                shape = [*shape[:at], *broadcast, *shape[at:]]
            operands.append((term, tuple(shape), with_ellipsis))
        used = [c for term, _, _ in operands for c in term if c != "..."]
        has_ellipsis = any(e for _, _, e in operands)
        explicit = rng.random() < 0.6
        output: list[str] | None = None
        if explicit:
            distinct = list(dict.fromkeys(used))
            output = rng.sample(distinct, rng.randint(0, len(distinct)))
            if has_ellipsis and rng.random() < 0.7:
                output.insert(rng.randint(0, len(output)), "...")
        sublist = rng.random() < 0.4
        builders = [tensor(*shape) for _, shape, _ in operands]
        if sublist:
            index = {c: k for k, c in enumerate(labels)}
            args: list[Any] = []
            for (term, _, _), build in zip(operands, builders, strict=True):
                args += [build, _sublist(term, index)]
            if output is not None:
                args.append(_sublist(output, index))
        else:
            equation = ",".join("".join(term) for term, _, _ in operands)
            if output is not None:
                equation += "->" + "".join(output)
            args = [equation, *builders]
        case = TorchCase(f"random-{seed}-{len(cases)}", tuple(args), "test_einsum_random",
                         seed=len(cases))
        try:
            torch.einsum(*case.build())
        except (RuntimeError, ValueError):
            continue  # torch refuses it (a size that does not broadcast): not a valid call
        cases.append(case)
    return cases


TEST_EINSUM = _test_einsum()
SUBLIST = _test_sublist()
CORNER = _test_corner_cases()
ERRORS = error_cases()
OPINFO = opinfo_samples()
RANDOM = random_cases(40, seed=18)
VALID = TEST_EINSUM + SUBLIST + CORNER + OPINFO + RANDOM
"""Every case torch.einsum computes."""
