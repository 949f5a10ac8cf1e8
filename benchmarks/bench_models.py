"""One training step of transformers models, under ``patch()`` against plain torch.einsum.

Models built from configs with random weights (nothing is downloaded): XLNet, Funnel,
Longformer and Mamba2, each with its dropout off so that both runs compute the same
step. One step is the forward pass of a language-model loss and its backward pass; the
runs (``torch``: torch.einsum as it is; ``patched``: inside
``einsum_analyze.torch.patch()``; ``torch-again``: the unpatched step once more, whose
time against ``torch`` is the run's noise) alternate step by step on one model, so that
drift falls on all alike. Reported per model: median step seconds, the median of each
repeat's paired ratio (patched over the unpatched step just before or after it, and
torch-again's alike, whose upper quartile is the noise a miss is read against),
measured peak (CUDA
``max_memory_allocated`` above what the model and batch hold; cpu: the allocator's
events under ``torch.profiler``), the loss, the largest relative gradient gap between
the two runs beside that of two unpatched steps (the model's own nondeterminism, such as
atomic additions on CUDA), and what the drop-in ran for each einsum of the step
(``cache_info()``).

    python benchmarks/bench_models.py --device cpu --threads 1
    python benchmarks/bench_models.py --device cpu,cuda --json models.json

``--device cpu,cuda`` runs both in one process, one table. ``--size full`` (the default on
cuda) is the issue's (XLNet d_model 512, 4 layers, batch 8x256, and the others alike);
``tiny`` (the default on cpu) fits a 2-core cpu. Needs ``transformers``; it prints one line and
exits 2 where it is not installed.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from _common import CLOCKS, environment, fence, wanted_names  # noqa: E402

SIZES: dict[str, dict[str, int]] = {
    "full": {"width": 512, "layers": 4, "heads": 8, "batch": 8, "length": 256,
             "vocab": 8192},
    "tiny": {"width": 64, "layers": 2, "heads": 4, "batch": 2, "length": 64, "vocab": 512},
}
"""Model width, layers, attention heads, batch, sequence length and vocabulary."""


def _xlnet(size: dict[str, int]) -> Any:
    from transformers import XLNetConfig, XLNetLMHeadModel

    return XLNetLMHeadModel(XLNetConfig(
        vocab_size=size["vocab"], d_model=size["width"], n_layer=size["layers"],
        n_head=size["heads"], d_inner=4 * size["width"], dropout=0.0))


def _funnel(size: dict[str, int]) -> Any:
    from transformers import FunnelConfig, FunnelForMaskedLM

    return FunnelForMaskedLM(FunnelConfig(
        vocab_size=size["vocab"], block_sizes=[size["layers"] // 2 or 1] * 2,
        d_model=size["width"], n_head=size["heads"], d_head=size["width"] // size["heads"],
        d_inner=4 * size["width"], hidden_dropout=0.0, attention_dropout=0.0,
        activation_dropout=0.0))


def _longformer(size: dict[str, int]) -> Any:
    from transformers import LongformerConfig, LongformerForMaskedLM

    return LongformerForMaskedLM(LongformerConfig(
        vocab_size=size["vocab"], hidden_size=size["width"],
        num_hidden_layers=size["layers"], num_attention_heads=size["heads"],
        intermediate_size=4 * size["width"],
        attention_window=[size["length"] // 4] * size["layers"],
        max_position_embeddings=size["length"] + 2, hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0))


def _mamba2(size: dict[str, int]) -> Any:
    from transformers import Mamba2Config, Mamba2ForCausalLM

    head_dim = 16 if size["width"] < 256 else 64
    return Mamba2ForCausalLM(Mamba2Config(
        vocab_size=size["vocab"], hidden_size=size["width"], num_hidden_layers=size["layers"],
        expand=2, head_dim=head_dim, num_heads=2 * size["width"] // head_dim,
        state_size=16 if size["width"] < 256 else 64, n_groups=1,
        chunk_size=size["length"] // 4))


MODELS: dict[str, Callable[[dict[str, int]], Any]] = {
    "xlnet": _xlnet, "funnel": _funnel, "longformer": _longformer, "mamba2": _mamba2,
}


CLOCK = CLOCKS["wall"]


def training_step(model: Any, ids: Any, labels: Any) -> Callable[[], Any]:
    """Forward (a language-model loss on random labels) and backward; returns the loss."""
    def step() -> Any:
        model.zero_grad(set_to_none=True)
        loss = model(input_ids=ids, labels=labels).loss
        loss.backward()
        return loss.detach()

    return step


def measured_peak(step: Callable[[], Any], device: str) -> int:
    """The allocator's peak during ``step``, above what is held before it."""
    import torch

    if device == "cuda":
        fence(device)
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        step()
        fence(device)
        return int(torch.cuda.max_memory_allocated() - base)
    from einsum_analyze.backends.torch_backend import allocator_peak_cpu

    peak, _ = allocator_peak_cpu(step)
    return int(peak)


def run_model(name: str, size: dict[str, int], device: str,
              args: argparse.Namespace) -> dict[str, Any]:
    import torch

    import einsum_analyze.torch as dropin

    torch.manual_seed(0)
    model = MODELS[name](size).to(device)
    model.train()
    ids = torch.randint(0, size["vocab"], (size["batch"], size["length"]),
                        generator=torch.Generator().manual_seed(1)).to(device)
    labels = torch.randint(0, size["vocab"], (size["batch"], size["length"]),
                           generator=torch.Generator().manual_seed(2)).to(device)
    plain = training_step(model, ids, labels)
    patcher = dropin.patch()

    def patched() -> Any:
        with patcher:
            return plain()

    einsum_calls = count_einsums(plain)
    loss_torch = plain()
    grads_torch = {n: p.grad.detach().clone() for n, p in model.named_parameters()
                   if p.grad is not None}
    def gap_to_torch() -> float:
        return max((float((p.grad - grads_torch[n]).abs().max())
                    / max(float(grads_torch[n].abs().max()), 1e-30))
                   for n, p in model.named_parameters() if p.grad is not None)

    plain()
    floor = gap_to_torch()  # torch against itself: the model's own nondeterminism
    dropin.clear_cache()
    loss_patched = patched()
    gap = gap_to_torch()
    # torch-again: the unpatched step once more, as a run of its own (the run's noise)
    steps = {"torch": plain, "torch-again": plain, "patched": patched}
    runs: dict[str, list[float]] = {which: [] for which in steps}
    for _ in range(args.warmup):
        plain()
        patched()
    order = list(steps)
    for repeat in range(args.repeats):
        shift = repeat % len(order)  # each goes first as often as the others
        for which in order[shift:] + order[:shift]:
            fence(device)
            start = CLOCK()
            steps[which]()
            fence(device)
            runs[which].append(CLOCK() - start)
    measured: dict[str, list[int]] = {"torch": [], "patched": []}
    for _ in range(2):  # the second of each: the first may hold one-time allocations
        for which in ("torch", "patched"):
            measured[which].append(measured_peak(steps[which], device))
    peaks = {which: values[-1] for which, values in measured.items()}
    choices = {}
    for choice in dropin.cache_info().choices:
        choices.setdefault(f"{choice.equation} {choice.runs}", 0)
        choices[f"{choice.equation} {choice.runs}"] += 1
    seconds = {which: statistics.median(times) for which, times in runs.items()}
    # Paired ratios: each repeat's steps ran back to back, so drift cancels in their ratio.
    paired = {which: [t / base for t, base in zip(runs[which], runs["torch"], strict=True)]
              for which in ("patched", "torch-again")}
    return {
        "model": name, "device": device, "size": size, "einsum_calls_per_step": einsum_calls,
        "seconds": seconds, "peak_bytes": peaks,
        "time_ratio": seconds["patched"] / seconds["torch"],
        "time_ratio_torch_twice": seconds["torch-again"] / seconds["torch"],
        "time_ratio_paired": statistics.median(paired["patched"]),
        "time_ratio_paired_torch_twice": statistics.median(paired["torch-again"]),
        "noise_upper_quartile": _upper_quartile(paired["torch-again"]),
        "peak_ratio": peaks["patched"] / peaks["torch"] if peaks["torch"] else math.nan,
        "loss": {"torch": float(loss_torch), "patched": float(loss_patched)},
        "largest_relative_gradient_gap": gap,
        "largest_relative_gradient_gap_torch_twice": floor,
        "dropin_ran": choices,
    }


def _upper_quartile(values: list[float]) -> float:
    """The third quartile (the median where there are fewer than four values)."""
    if len(values) < 4:
        return statistics.median(values)
    return statistics.quantiles(values, n=4)[2]


def count_einsums(step: Callable[[], Any]) -> int:
    """torch.einsum calls in one step (forward; backward runs no torch.einsum)."""
    import torch

    original = torch.einsum
    count = 0

    def counting(*args: Any, **kwargs: Any) -> Any:
        nonlocal count
        count += 1
        return original(*args, **kwargs)

    torch.einsum = counting
    try:
        step()
    finally:
        torch.einsum = original
    return count


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu",
                        help="cpu, cuda, or both in one run: cpu,cuda")
    parser.add_argument("--size", default=None, choices=tuple(SIZES),
                        help="full (the default on cuda) or tiny (on cpu)")
    parser.add_argument("--models", default=",".join(MODELS),
                        help=f"comma-separated, of: {', '.join(MODELS)}")
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--threads", type=int, default=None, help="torch threads (cpu)")
    parser.add_argument("--clock", choices=tuple(CLOCKS), default=None,
                        help="wall (default on cuda) or the process's cpu time (default "
                        "on cpu)")
    parser.add_argument("--json", dest="json_path", default=None)
    args = parser.parse_args()
    global CLOCK
    names = wanted_names(args.models, MODELS, option="--models") or list(MODELS)
    devices = [d for d in args.device.split(",") if d]
    if not devices or any(d not in ("cpu", "cuda") for d in devices):
        print(f"bench_models: --device {args.device!r}: give cpu, cuda or cpu,cuda",
              file=sys.stderr)
        return 2
    args.clock = args.clock or ("wall" if "cuda" in devices else "cpu")
    if "cuda" in devices and args.clock == "cpu":
        print("bench_models: --clock cpu times the host only; use wall on cuda",
              file=sys.stderr)
        return 2
    CLOCK = CLOCKS[args.clock]
    try:
        import transformers
    except ImportError:
        print("bench_models: transformers is not installed", file=sys.stderr)
        return 2
    import torch

    if "cuda" in devices and not torch.cuda.is_available():
        print("bench_models: no CUDA device here", file=sys.stderr)
        return 2
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    torch.backends.cuda.matmul.allow_tf32 = False
    start = time.perf_counter()
    results = []
    for device in devices:
        size = SIZES[args.size or ("full" if device == "cuda" else "tiny")]
        for name in names:
            results.append(run_model(name, size, device, args))
            print(f"# {name} on {device} done ({time.perf_counter() - start:.0f} s)",
                  file=sys.stderr, flush=True)
    env = {**environment(devices[-1]), "transformers": transformers.__version__,
           "clock": args.clock,
           "load_average_1min": round(os.getloadavg()[0], 2),
           "command": " ".join(["python"] + sys.argv)}
    lines = ["| model | device | einsums/step | torch ms | patched ms | time patched/torch | "
             "torch vs torch (time) | torch peak MiB | patched peak MiB | "
             "paired patched/torch | paired torch vs torch | "
             "peak patched/torch | gradient gap | torch vs torch | "
             "loss torch | loss patched |", "|" + "---|" * 16]
    for r in results:
        lines.append(
            f"| {r['model']} | {r['device']} | {r['einsum_calls_per_step']} | "
            f"{r['seconds']['torch'] * 1e3:.2f} | {r['seconds']['patched'] * 1e3:.2f} | "
            f"{r['time_ratio']:.3f} | {r['time_ratio_torch_twice']:.3f} | "
            f"{r['peak_bytes']['torch'] / 2**20:.2f} | "
            f"{r['peak_bytes']['patched'] / 2**20:.2f} | {r['time_ratio_paired']:.3f} | "
            f"{r['time_ratio_paired_torch_twice']:.3f} | {r['peak_ratio']:.3f} | "
            f"{r['largest_relative_gradient_gap']:.1e} | "
            f"{r['largest_relative_gradient_gap_torch_twice']:.1e} | {r['loss']['torch']:.5f} | "
            f"{r['loss']['patched']:.5f} |")
    ran = ["What the drop-in ran (einsum, what it ran, and how many plans of it are cached):"]
    ran += [f"  {r['model']} ({r['device']}): "
            + "; ".join(f"{k} x{v}" for k, v in r["dropin_ran"].items()) for r in results]
    met = [f"{r['model']} ({r['device']})" for r in results
           if r["time_ratio"] <= 1.0 and r["peak_ratio"] <= 1.0]
    # Within noise: the paired ratio is no further above 1 than a quarter of the unpatched
    # step's own repeats fall (torch against itself, the same kernels timed twice).
    noisy = [f"{r['model']} ({r['device']})" for r in results
             if f"{r['model']} ({r['device']})" not in met and r["peak_ratio"] <= 1.0
             and r["time_ratio_paired"] <= max(1.0, r["noise_upper_quartile"])]
    sizes = {r["device"]: r["size"] for r in results}
    print("\n".join(["Environment: " + json.dumps(env), f"sizes: {json.dumps(sizes)}", ""]
                    + lines + [""] + ran + ["",
                    "targets (<= 1.0x step time and peak) met by: " + (", ".join(met) or "none"),
                    "missed within the noise (paired patched/torch at most the upper quartile "
                    "of torch against itself, peak <= 1.0x): " + (", ".join(noisy) or "none"),
                    f"wall: {time.perf_counter() - start:.1f} s"]))
    if args.json_path:
        Path(args.json_path).write_text(json.dumps(
            {"environment": env, "models": results}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
