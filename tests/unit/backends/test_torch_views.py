"""ViewChain: a chain of views replayed as one as_strided gives the chain's own result."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from einsum_analyze.backends.torch_views import ViewChain  # noqa: E402


def _same_view(a, b) -> None:
    assert a.shape == b.shape
    assert a.stride() == b.stride()
    assert a.storage_offset() == b.storage_offset()
    assert a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()
    assert torch.equal(a, b)


CHAINS = {
    "view-transpose": (lambda t: t.view(12, 2).unsqueeze(0).transpose(1, 2), (3, 4, 2)),
    "diagonal-expand": (lambda t: t.diagonal(0, 0, 1).unsqueeze(0).expand(5, 3, 3), (3, 3, 3)),
    "slice-with-offset": (lambda t: t[1:3, ::2], (4, 6)),
    "squeeze-select": (lambda t: t.squeeze(1)[2], (4, 1, 5)),
}


@pytest.mark.parametrize("name", sorted(CHAINS))
def test_the_replayed_view_is_the_chains_view(name: str) -> None:
    chain, shape = CHAINS[name]
    viewed = ViewChain(chain)
    base = torch.arange(2.0 * torch.Size(shape).numel()).view(2, *shape)
    # Contiguous, at a storage offset, and transposed inputs of the same shape.
    inputs = [base[0], base[1], base[1].flip(0).contiguous()]
    if len(shape) >= 2 and shape[0] == shape[1]:
        inputs.append(base[1].transpose(0, 1))
    for tensor in inputs:
        first = viewed(tensor)  # learns this stride
        _same_view(first, chain(tensor))
        again = viewed(tensor)  # replayed as one as_strided
        _same_view(again, chain(tensor))
        assert tensor.stride() in viewed.memo


def test_a_chain_that_changes_nothing_returns_its_input() -> None:
    viewed = ViewChain(lambda t: t.permute(0, 1))
    x = torch.randn(3, 4)
    viewed(x)
    assert viewed.memo[x.stride()] is None
    assert viewed(x) is x


def test_a_chain_learns_each_stride_apart() -> None:
    viewed = ViewChain(lambda t: t.t())
    x = torch.randn(4, 4)
    _same_view(viewed(x), x.t())
    _same_view(viewed(x.t()), x)  # another stride: learnt again, not replayed wrongly
    _same_view(viewed(x.t()), x)
    assert len(viewed.memo) == 2


def test_a_chain_that_copies_is_run_each_time() -> None:
    viewed = ViewChain(lambda t: t.permute(1, 0, 2).reshape(1, 12, 2))  # reshape copies
    x = torch.arange(24.0).view(3, 4, 2)
    for _ in range(2):
        result = viewed(x)
        assert torch.equal(result, x.permute(1, 0, 2).reshape(1, 12, 2))
        assert result.untyped_storage().data_ptr() != x.untyped_storage().data_ptr()
