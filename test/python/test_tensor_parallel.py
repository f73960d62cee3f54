"""Scale-out: a tensor-parallel LlamaForCausalLM (2 processes, gloo on the
CPU) through torch.compile(backend="linfuse"). Each rank's local Q/K/V and
gate/up shards merge, the collectives stay with PyTorch, and the logits
match the unsplit model."""

import json
import os
import pathlib
import subprocess
import sys

WORKER = pathlib.Path(__file__).parent / "workers" / "tensor_parallel_llama.py"


def test_two_rank_tensor_parallel_llama(tmp_path):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path), OMP_NUM_THREADS="1",
               LINFUSE_TP_RESULTS=str(tmp_path))
    proc = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
         "--standalone", str(WORKER)],
        capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    results = [json.loads(p.read_text()) for p in sorted(tmp_path.glob("rank*.json"))]
    assert sorted(r["rank"] for r in results) == [0, 1], proc.stdout[-2000:]
    for r in results:
        assert all(e < 1e-4 for e in r["errors"]), r
        # Per rank and layer: its halves of q/k/v (64 + 32 + 32 columns) in
        # one GEMM, its halves of gate/up (128 + 128) in another.
        qkv = [m for m in r["merges"] if m["count"] == 3]
        gate_up = [m for m in r["merges"] if m["count"] == 2]
        assert len(qkv) == 2 and all(m["shape"].endswith("x128") for m in qkv), r
        assert len(gate_up) == 2 and all(m["shape"].endswith("x256") for m in gate_up), r
        # The RMSNorm gammas stay multiplies (folding them into the local
        # weight shards would copy them).
        assert r["folds"] == 0, r
        # The all-reduces after o_proj and down_proj run in PyTorch.
        assert any("all_reduce" in op for op in r["left_to_pytorch"]), r
        # 15 nn.Linear calls in eager; here per layer qkv, gate/up, o, down,
        # and lm_head.
        assert r["gemm_calls"] == [9, 9], r
        # DTensor's sharding propagation guards on batch % 2 (the second
        # input has an odd batch): Dynamo compiles twice, for any backend.
        assert r["graphs"] <= 2, r
