"""Where a graphed drop-in call's host time goes: each part of it timed alone (CUDA only).

A call with ``cuda_graphs=True`` copies its operands in, replays the forward graph,
copies the result out; its backward copies the upstream gradient in, replays the
backward graph and copies the gradients out; around them run the slot's bookkeeping
(may it replay now, which graph set, which stream) and the autograd node. This script
times, per case, the whole call forward + backward (``autograd.grad``) beside
torch.einsum's and the drop-in's eager call, then each of those parts alone, on the
entry's own captured graph set, so that the parts can be read against the whole.

    python benchmarks/bench_graph_overhead.py --cases trace,diag-private,tn18-b512

Every figure is host microseconds per call: blocks of ``--calls`` calls, fenced by a
device synchronisation at both ends only, the median of ``--repeats`` blocks, the parts
interleaved block by block.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from _common import block_seconds, environment, wanted_names  # noqa: E402

HERE = Path(__file__).parent


def parts(equation: str, shapes: list[list[int]]) -> dict[str, Callable[[], Any]]:
    """The whole calls, then each part of a graphed call, as callables."""
    import torch

    from einsum_analyze.torch import einsum
    from einsum_analyze.training.choice import NO_BUDGET
    from einsum_analyze.training.plans import get_plan, plan_key

    generator = torch.Generator().manual_seed(0)
    operands = [torch.randn(s, generator=generator).cuda().requires_grad_() for s in shapes]
    out_shape = torch.einsum(equation, *[t.detach() for t in operands]).shape
    upstream = torch.randn(tuple(out_shape), generator=generator).cuda()
    for _ in range(2):  # the capture
        torch.autograd.grad(einsum(equation, *operands, cuda_graphs=True), operands, upstream)
    plan = get_plan(*plan_key(operands, equation, "auto", "auto", NO_BUDGET,
                              [True] * len(operands)))
    slot = plan.graphs
    assert slot is not None and slot.instances, slot
    instance = slot.instances[0]
    tensors = [t.detach() for t in operands]
    unit = torch.ones_like(tensors[0])  # the nothing node's upstream, its output's shape

    class Nothing(torch.autograd.Function):
        """A Python autograd node that computes nothing: its engine's cost on CUDA."""

        @staticmethod
        def forward(ctx: Any, *xs: Any) -> Any:
            return xs[0].view_as(xs[0])

        @staticmethod
        def backward(ctx: Any, grad: Any) -> Any:
            return (grad,) + (None,) * (len(operands) - 1)

    def claim_release() -> None:
        claimed = slot.claim()
        assert claimed is not None
        slot.release(*claimed)

    def grads_out() -> Any:
        out = [torch.empty_like(g) for g in instance.static_gradients]
        torch._foreach_copy_(out, instance.static_gradients)  # noqa: SLF001
        return out

    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)  # noqa: SLF001
    steps: dict[str, Callable[[], Any]] = {
        "torch.einsum fwd+bwd": lambda: torch.autograd.grad(
            torch.einsum(equation, *operands), operands, upstream),
        "drop-in eager fwd+bwd": lambda: torch.autograd.grad(
            einsum(equation, *operands), operands, upstream),
        "drop-in graphed fwd+bwd": lambda: torch.autograd.grad(
            einsum(equation, *operands, cuda_graphs=True), operands, upstream),
        "python node, nothing in it": lambda: torch.autograd.grad(
            Nothing.apply(*operands), operands[:1], unit),
        "copy in (foreach)": lambda: torch._foreach_copy_(  # noqa: SLF001
            instance.static_inputs, tensors),
        "forward replay": instance.forward_graph.replay,
        "result out (clone)": lambda: instance.static_output.clone(),
        "upstream in (copy_)": lambda: instance.static_upstream.copy_(upstream),
        "backward replay": instance.backward_graph.replay,
        "gradients out (foreach)": grads_out,
        "slot.usable": lambda: slot.usable(True),
        "claim + release": claim_release,
        "current_stream()": torch.cuda.current_stream,
    }
    if raw is not None:
        steps["raw stream handle"] = lambda: raw(0)
    return steps


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default="trace,diag-private,tn18-b512")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--calls", type=int, default=50)
    args = parser.parse_args()
    cases = {c["name"]: c for file in ("cases.json", "model_einsums.json")
             for c in json.loads((HERE / file).read_text())["cases"]}
    wanted = wanted_names(args.cases, cases)
    import torch

    if not torch.cuda.is_available():
        print("no CUDA device here", file=sys.stderr)
        return 2
    torch.backends.cuda.matmul.allow_tf32 = False
    print("Environment: " + json.dumps({**environment("cuda"),
                                         "command": " ".join(["python"] + sys.argv)}),
          flush=True)
    for name in wanted:
        steps = parts(cases[name]["equation"], cases[name]["shapes"])
        for step in steps.values():  # warm
            block_seconds(step, "cuda", 3)
        times: dict[str, list[float]] = {step: [] for step in steps}
        for _ in range(args.repeats):
            for step, call in steps.items():
                times[step].append(block_seconds(call, "cuda", args.calls))
        blocks = {step: statistics.median(values) for step, values in times.items()}
        print(f"\n{name} ({cases[name]['equation']}), host us per call, median of "
              f"{args.repeats} blocks:", flush=True)
        for step, value in blocks.items():
            print(f"  {step:28s} {value * 1e6:9.1f}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
