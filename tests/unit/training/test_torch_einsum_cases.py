"""PyTorch's einsum tests as ours: the drop-in and ``patch()`` against torch.einsum.

Every case of :mod:`torch_einsum_cases` (``test_einsum``, the sublist format, random
calls with fixed seeds, corner cases, the OpInfo samples) runs through
``einsum_analyze.torch.einsum`` with a plan of ours (``strategy="reverse"``: ``auto``
may run torch.einsum itself) and through ``torch.einsum`` under ``patch()``, and is
compared with torch.einsum in float64: values, every gradient, the result's strides.
The error cases must raise what torch.einsum raises, in one line.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch_einsum_cases import ERRORS, VALID, TorchCase

from einsum_analyze.torch import einsum, patch
from einsum_analyze.training.calls import TORCH_EINSUM, same_layout

Run = Callable[[list[Any]], torch.Tensor]


def _dropin(args: list[Any]) -> torch.Tensor:
    return einsum(*args, strategy="reverse")


def _patched(args: list[Any]) -> torch.Tensor:
    with patch():
        return torch.einsum(*args)  # type: ignore[no-any-return]


RUNS: dict[str, Run] = {"dropin-reverse": _dropin, "patch-auto": _patched}


def _with_leaves(case: TorchCase) -> tuple[list[Any], list[torch.Tensor]]:
    """The call's arguments, each operand a leaf needing a gradient."""
    args = case.build()
    leaves = []
    for k, arg in enumerate(args):
        if isinstance(arg, torch.Tensor):
            args[k] = arg.detach().requires_grad_()
            leaves.append(args[k])
    return args, leaves


def _compare(case: TorchCase, run: Run) -> None:
    want_args, want_leaves = _with_leaves(case)
    want = TORCH_EINSUM(*want_args)
    got_args, got_leaves = _with_leaves(case)
    got = run(got_args)
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
    assert same_layout(tuple(want.shape), got.stride(), want.stride()), (
        f"{case}: strides {got.stride()} where torch.einsum's are {want.stride()}")
    assert got.is_contiguous() or not want.is_contiguous()
    generator = torch.Generator().manual_seed(7)
    upstream = torch.randn(want.shape, generator=generator, dtype=want.dtype)
    wanted = torch.autograd.grad(want, want_leaves, upstream, allow_unused=True)
    gotten = torch.autograd.grad(got, got_leaves, upstream, allow_unused=True)
    for g, w in zip(gotten, wanted, strict=True):
        if w is None:
            assert g is None or not g.count_nonzero()
            continue
        torch.testing.assert_close(g, w, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("run", list(RUNS), ids=str)
@pytest.mark.parametrize("case", VALID, ids=str)
def test_matches_torch_einsum(case: TorchCase, run: str) -> None:
    _compare(case, RUNS[run])


def test_the_cases_cover_every_source() -> None:
    sources = {case.source for case in VALID}
    assert sources == {"test_einsum", "test_einsum_sublist_format", "test_einsum_random",
                       "test_einsum_corner_cases", "OpInfo einsum"}
    assert sum(case.source == "test_einsum_random" for case in VALID) == 40


def _raised(call: Callable[[], Any]) -> BaseException:
    try:
        call()
    except Exception as err:  # noqa: BLE001 - the type is what the test compares
        return err
    raise AssertionError("did not raise")


@pytest.mark.parametrize("run", list(RUNS), ids=str)
@pytest.mark.parametrize("case", ERRORS, ids=str)
def test_refuses_as_torch_einsum_does(case: TorchCase, run: str) -> None:
    args = case.build()
    want = _raised(lambda: TORCH_EINSUM(*args))
    got = _raised(lambda: RUNS[run](args))
    assert isinstance(got, type(want)), f"{type(got).__name__} where torch raises {want!r}"
    assert "\n" not in str(got) and "einsum" in str(got)


def test_python_scalars_are_refused_as_torch_einsum_refuses_them() -> None:
    x = torch.ones(3)
    for args in (("i,->i", x, 2.0), ("i,i->", [x, 3])):
        want = _raised(lambda args=args: TORCH_EINSUM(*args))  # type: ignore[misc]
        got = _raised(lambda args=args: einsum(*args))  # type: ignore[misc]
        assert type(got) is type(want)


STRIDED: dict[str, tuple[str, tuple[tuple[int, ...], ...], tuple[tuple[int, ...], ...]]] = {
    # name: equation, operand shapes, the order of each operand's dimensions in memory
    "transpose of a transposed operand": ("ij->ji", ((2, 3),), ((1, 0),)),
    "identity of a transposed operand": ("ij", ((2, 3),), ((1, 0),)),
    "product with a broadcast vector": ("ij,j->ij", ((2, 3), (3,)), ((1, 0), (0,))),
    "elementwise product of transposed operands": ("ij,ij->ij", ((2, 3), (2, 3)),
                                                   ((1, 0), (1, 0))),
    "outer product of a transposed operand": ("ij,k->ijk", ((2, 3), (4,)), ((1, 0), (0,))),
    "sum over a permuted operand": ("ijk->ik", ((2, 3, 4),), ((2, 1, 0),)),
    "matrix product of a transposed operand": ("ij,jk->ik", ((2, 3), (3, 4)),
                                               ((1, 0), (0, 1))),
}
"""Calls with non-contiguous operands whose torch.einsum result follows their strides
(``ij->ji`` of a transposed operand is contiguous there)."""


def _strided(shape: tuple[int, ...], order: tuple[int, ...], seed: int) -> torch.Tensor:
    """A leaf of ``shape`` whose memory runs through its dimensions in ``order``."""
    generator = torch.Generator().manual_seed(seed)
    base = torch.randn([shape[d] for d in order], generator=generator, dtype=torch.float64)
    inverse = sorted(range(len(order)), key=order.__getitem__)
    return base.permute(inverse).requires_grad_()


@pytest.mark.parametrize("strategy", ["reverse", "independent", "checkpoint", "sliced"])
@pytest.mark.parametrize("name", list(STRIDED), ids=str)
def test_non_contiguous_operands_give_torch_einsums_strides(name: str, strategy: str) -> None:
    equation, shapes, orders = STRIDED[name]
    want_leaves = [_strided(s, o, k) for k, (s, o) in enumerate(zip(shapes, orders, strict=True))]
    got_leaves = [_strided(s, o, k) for k, (s, o) in enumerate(zip(shapes, orders, strict=True))]
    want = TORCH_EINSUM(equation, *want_leaves)
    got = einsum(equation, *got_leaves, strategy=strategy)
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
    assert same_layout(tuple(want.shape), got.stride(), want.stride()), (
        f"strides {got.stride()} where torch.einsum's are {want.stride()}")
    if want.is_contiguous():
        got.view(-1)
    upstream = torch.randn(want.shape, generator=torch.Generator().manual_seed(5),
                           dtype=torch.float64)
    for g, w in zip(torch.autograd.grad(got, got_leaves, upstream),
                    torch.autograd.grad(want, want_leaves, upstream), strict=True):
        torch.testing.assert_close(g, w, rtol=1e-12, atol=1e-12)
