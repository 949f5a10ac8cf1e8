"""Real models under ``patch()``: transformers architectures that call torch.einsum.

Each model is built from a small config with random weights (no download): XLNet (plain,
and two-stream attention with a permutation mask and target mapping), Funnel,
Longformer, LED and Mamba2. In float64, the loss and every parameter's gradient under
``patch()`` must equal those of the same model calling torch.einsum, with ``reverse`` (a
plan of ours for every call) and, for the models that view einsum results, ``auto``. The
module skips where transformers is not installed.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import pytest
import torch

import einsum_analyze.torch as dropin
from einsum_analyze.torch import patch

transformers = pytest.importorskip("transformers")

Batch = dict[str, torch.Tensor]


def _tokens(generator: torch.Generator, *shape: int) -> torch.Tensor:
    return torch.randint(0, 40, shape, generator=generator)


def _xlnet(two_stream: bool) -> tuple[Any, Batch]:
    config = transformers.XLNetConfig(vocab_size=40, d_model=16, n_layer=2, n_head=2,
                                      d_inner=32, dropout=0.0)
    model = transformers.XLNetLMHeadModel(config)
    # XLNet builds its sinusoidal position embedding in float32 whatever the model's
    # dtype: in float64 two-stream attention's einsums would mix the two (torch.einsum
    # itself refuses that), so the embedding is cast to the model's dtype.
    encoding = model.transformer.relative_positional_encoding
    model.transformer.relative_positional_encoding = (
        lambda *args, **kwargs: encoding(*args, **kwargs).to(model.dtype))
    g = torch.Generator().manual_seed(1)
    ids = _tokens(g, 2, 6)
    batch: Batch = {"input_ids": ids}
    if two_stream:  # predict the last token from a permutation that hides it
        perm = torch.zeros(2, 6, 6, dtype=torch.float64)
        perm[:, :, -1] = 1.0
        target = torch.zeros(2, 1, 6, dtype=torch.float64)
        target[:, 0, -1] = 1.0
        batch.update(perm_mask=perm, target_mapping=target, labels=ids[:, -1:])
    else:
        batch["labels"] = ids
    return model, batch


def _funnel() -> tuple[Any, Batch]:
    config = transformers.FunnelConfig(vocab_size=40, block_sizes=[1, 1], block_repeats=[1, 1],
                                       num_decoder_layers=1, d_model=16, n_head=2, d_head=8,
                                       d_inner=32, hidden_dropout=0.0, attention_dropout=0.0,
                                       activation_dropout=0.0)
    model = transformers.FunnelForMaskedLM(config)
    ids = _tokens(torch.Generator().manual_seed(2), 2, 8)
    return model, {"input_ids": ids, "labels": ids}


def _longformer() -> tuple[Any, Batch]:
    config = transformers.LongformerConfig(vocab_size=40, hidden_size=16, num_hidden_layers=1,
                                           num_attention_heads=2, intermediate_size=32,
                                           attention_window=4, max_position_embeddings=40,
                                           hidden_dropout_prob=0.0,
                                           attention_probs_dropout_prob=0.0, pad_token_id=1)
    model = transformers.LongformerForMaskedLM(config)
    ids = _tokens(torch.Generator().manual_seed(3), 2, 8) + 2
    return model, {"input_ids": ids, "labels": ids}


def _led() -> tuple[Any, Batch]:
    config = transformers.LEDConfig(vocab_size=50, d_model=16, encoder_layers=1,
                                    decoder_layers=1, encoder_attention_heads=2,
                                    decoder_attention_heads=2, encoder_ffn_dim=32,
                                    decoder_ffn_dim=32, attention_window=4,
                                    max_encoder_position_embeddings=32,
                                    max_decoder_position_embeddings=32, dropout=0.0,
                                    attention_dropout=0.0, activation_dropout=0.0)
    model = transformers.LEDForConditionalGeneration(config)
    g = torch.Generator().manual_seed(4)
    return model, {"input_ids": _tokens(g, 2, 8) + 3, "labels": _tokens(g, 2, 5) + 3}


def _mamba2() -> tuple[Any, Batch]:
    config = transformers.Mamba2Config(vocab_size=40, hidden_size=16, num_hidden_layers=1,
                                       num_heads=4, head_dim=8, state_size=8, n_groups=1,
                                       expand=2, chunk_size=4)
    model = transformers.Mamba2ForCausalLM(config)
    ids = _tokens(torch.Generator().manual_seed(5), 2, 8)
    return model, {"input_ids": ids, "labels": ids}


MODELS: dict[str, Callable[[], tuple[Any, Batch]]] = {
    "xlnet": lambda: _xlnet(False),
    "xlnet-two-stream": lambda: _xlnet(True),
    "funnel": _funnel,
    "longformer": _longformer,
    "led": _led,
    "mamba2": _mamba2,
}


def _loss_and_gradients(model: Any, batch: Batch) -> tuple[torch.Tensor, dict[str, Any]]:
    model.zero_grad(set_to_none=True)
    loss = model(**batch).loss
    loss.backward()
    return loss.detach(), {name: None if p.grad is None else p.grad.clone()
                           for name, p in model.named_parameters()}


@functools.cache
def _reference(name: str) -> tuple[Any, Batch, torch.Tensor, dict[str, Any]]:
    """The model in float64, its batch, and its loss and gradients with torch.einsum."""
    torch.manual_seed(0)
    model, batch = MODELS[name]()
    model = model.double().eval()
    return (model, batch, *_loss_and_gradients(model, batch))


RUNS = [(name, "reverse") for name in MODELS] + [("longformer", "auto"), ("led", "auto")]
"""Every model with a plan of ours for every call; ``auto`` (which may run torch.einsum
itself) on the two whose einsum results are viewed (``.view`` needs torch's layout)."""


@pytest.mark.parametrize(("name", "strategy"), RUNS, ids=[f"{n}-{s}" for n, s in RUNS])
def test_loss_and_every_gradient_match_torch_einsum(name: str, strategy: str) -> None:
    model, batch, want_loss, want = _reference(name)
    before = dropin.cache_info()
    with patch(strategy=strategy):
        loss, got = _loss_and_gradients(model, batch)
    after = dropin.cache_info()
    assert after.hits + after.misses > before.hits + before.misses  # the drop-in ran
    # Sums in another order differ in the last bits; Mamba2's gradients of order 1e-5
    # carry differences of 1e-12.
    torch.testing.assert_close(loss, want_loss, rtol=1e-10, atol=1e-12)
    assert got.keys() == want.keys()
    for key, gradient in want.items():
        if gradient is None:
            assert got[key] is None, key
            continue
        torch.testing.assert_close(got[key], gradient, rtol=1e-7, atol=1e-11, msg=key)
