"""The CUDA retained figure counts each live request, not the cached block it was given.

The caching allocator hands a cached block out whole when at most 1 MiB of it would be
left over; ``memory_allocated`` then counts the remainder, which depends on what earlier
runs left cached (the likely cause of ``tn18-b65536-bond64``'s retained bytes measured
1 MiB above the model on an H200). The snapshots below have the structure of
``torch.cuda.memory_snapshot()``'s (a 17 MiB block holding a 16 MiB tensor).
"""

from __future__ import annotations

from einsum_analyze.backends.torch_backend import held_bytes

MIB = 1 << 20


def _block(size: int, requested: int, state: str = "active_allocated") -> dict[str, object]:
    return {"size": size, "requested_size": requested, "state": state, "address": 0}


def test_a_block_handed_out_whole_counts_its_request() -> None:
    snapshot = [{"device": 0, "blocks": [_block(17 * MIB, 16 * MIB), _block(3 * MIB, 3 * MIB)]}]
    assert held_bytes(snapshot, 0) == 19 * MIB
    assert sum(b["size"] for b in snapshot[0]["blocks"]) == 20 * MIB  # what memory_allocated sees


def test_requests_round_to_the_allocators_granularity() -> None:
    snapshot = [{"device": 0, "blocks": [_block(512, 4), _block(1536, 1025)]}]
    assert held_bytes(snapshot, 0) == 512 + 1536


def test_free_blocks_and_other_devices_are_left_out() -> None:
    snapshot = [
        {"device": 0, "blocks": [_block(2 * MIB, 2 * MIB, "inactive"),
                                 _block(MIB, MIB, "active_awaiting_free"), _block(MIB, MIB)]},
        {"device": 1, "blocks": [_block(4 * MIB, 4 * MIB)]},
    ]
    assert held_bytes(snapshot, 0) == MIB
    assert held_bytes(snapshot, 1) == 4 * MIB
