"""One rank of the tensor-parallel check (test_tensor_parallel.py launches
two with torch.distributed.run, gloo on the CPU).

A 2-layer LlamaForCausalLM is split with torch.distributed.tensor.parallel
(q/k/v and gate/up column-wise, o/down row-wise) and compiled with
torch.compile(backend=linfuse). Each rank prints one JSON line: the error
against the unsplit model, the merges linfuse made of its local shards, the
operators left to PyTorch and the GEMM calls per forward, as JSON into
$LINFUSE_TP_RESULTS/rank<N>.json (ranks share one stdout, where lines can
interleave)."""

import json
import os

import torch
import torch.distributed as dist
import transformers
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor.parallel import (ColwiseParallel, RowwiseParallel,
                                               parallelize_module)

import linfuse
import linfuse.torch as lt


def main():
    world = int(os.environ["WORLD_SIZE"])
    dist.init_process_group("gloo")
    torch.manual_seed(0)       # the same model and inputs on every rank
    cfg = transformers.LlamaConfig(hidden_size=128, intermediate_size=256,
                                   num_hidden_layers=2, num_attention_heads=4,
                                   num_key_value_heads=2, vocab_size=500, use_cache=False)
    model = transformers.LlamaForCausalLM(cfg).eval()
    sizes = [(2, 7), (3, 5)]
    inputs = [torch.randint(0, 500, s) for s in sizes]
    with torch.no_grad():
        want = [model(input_ids=ids).logits for ids in inputs]

    plan = {}
    for i in range(cfg.num_hidden_layers):
        for name in ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
                     "mlp.gate_proj", "mlp.up_proj"):
            plan[f"model.layers.{i}.{name}"] = ColwiseParallel()
        for name in ("self_attn.o_proj", "mlp.down_proj"):
            plan[f"model.layers.{i}.{name}"] = RowwiseParallel()
    parallelize_module(model, init_device_mesh("cpu", (world,)), plan)

    be = lt.backend(fallback="eager")
    compiled = torch.compile(model, backend=be, dynamic=True)
    errors, calls = [], []
    with torch.no_grad():
        for ids, ref in zip(inputs, want):
            got = compiled(input_ids=ids).logits
            errors.append(((got - ref).abs().max() / ref.abs().max()).item())
            linfuse.runtime_stats(reset=True)
            compiled(input_ids=ids)
            calls.append(linfuse.runtime_stats()["gemm_calls"])
    report = be.graphs[0].report      # the first graph compiled
    result = {
        "rank": dist.get_rank(),
        "errors": errors,
        "gemm_calls": calls,
        "graphs": len(be.graphs),
        "merges": [{"count": m.details["count"], "shape": m.details["shape"]}
                   for m in report.merges],
        "folds": len([f for f in report.folds if "input scale" in f.message]),
        "left_to_pytorch": be.graphs[0].left_to_pytorch,
    }
    out = os.path.join(os.environ["LINFUSE_TP_RESULTS"], f"rank{dist.get_rank()}.json")
    with open(out, "w") as file:
        json.dump(result, file)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
