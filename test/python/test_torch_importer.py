"""linfuse.torch.importer end to end: torch.export -> MLIR -> linfuse-opt /
linfuse-run (optimized and --no-optimize) -> compared with eager PyTorch.

Run:  PYTHONPATH=build/python_packages .venv/bin/python -m pytest test/python/test_torch_importer.py
Tools come from $LINFUSE_BUILD_DIR/bin (default: <repo>/build/bin).
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest

import torch
nn = torch.nn
F = torch.nn.functional

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(os.environ.get("LINFUSE_BUILD_DIR", str(ROOT / "build"))) / "bin"
OPT = BIN / "linfuse-opt"
RUN = BIN / "linfuse-run"
THIS = Path(__file__).name


from linfuse.torch import importer  # noqa: E402

# These tests read the imported module as a self-contained program
# (linfuse-opt, linfuse-run on the inputs alone): weights embedded. The
# default, weights as `linfuse.weight` arguments, is tested at the end.
def import_program(ep, **kw):
    return importer.import_program(ep, **{"weights": "constants", **kw})

UnsupportedOperatorError = importer.UnsupportedOperatorError

# Relative tolerances (scaled by the largest |reference| value for the
# absolute part, so near-zero entries of a GEMM result are not over-weighted).
RTOL = {torch.float32: 1e-4, torch.float16: 1e-2, torch.bfloat16: 2e-2}

REPORT: list[str] = []   # max errors, printed at the end with -s


# ---------------------------------------------------------------------------
# Harness
# ---------------------------------------------------------------------------

def _to_npy(t: "torch.Tensor") -> np.ndarray:
    t = t.detach().contiguous().cpu()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(np.uint16)   # linfuse-run: bf16 as bits
    return t.numpy()


def _from_npy(a: np.ndarray, dtype) -> "torch.Tensor":
    if dtype == torch.bfloat16:
        return torch.from_numpy(np.ascontiguousarray(a).view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(np.ascontiguousarray(a))


def _run(cmd):
    p = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, (f"{' '.join(map(str, cmd))} failed ({p.returncode}):\n"
                               f"{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
    return p


def _gemm_calls(stdout: str) -> int:
    m = re.search(r"gemm_calls: (\d+)", stdout)
    assert m, stdout
    return int(m.group(1))


def export(model, args, dynamic_shapes=None, decompose=False):
    model = model.eval()
    ep = torch.export.export(model, tuple(args), dynamic_shapes=dynamic_shapes)
    return ep.run_decompositions() if decompose else ep


def check(tmp_path, model, args, *, dynamic_shapes=None, decompose=False,
          runs=None, remarks=(), gemms=None, label="", rtol=None):
    """Imports `model`, optimizes it with remarks, runs it optimized and not
    on `runs` (lists of inputs; default: `args`) and compares every output
    with eager torch.  Returns (prog, optimized IR, remarks text)."""
    ep = export(model, args, dynamic_shapes, decompose)
    prog = import_program(ep)
    src = tmp_path / "model.mlir"
    src.write_text(prog.ir)

    # Parses and verifies as is, and after the pipeline.
    _run([OPT, src, "-o", tmp_path / "parsed.mlir"])
    p = _run([OPT, src, "--linfuse-optimize", "--linfuse-remarks", "-o",
              tmp_path / "opt.mlir"])
    _run([OPT, tmp_path / "opt.mlir", "-o", os.devnull])
    text = p.stderr
    for want in remarks:
        assert re.search(want, text), f"no remark matching {want!r} in:\n{text}"
    for line in text.splitlines():
        if "remark:" in line and "merged" in line:
            # Remarks point at this file (the nn.Module's source line).
            assert THIS in line, line

    stats = {}
    for i, inputs in enumerate(runs or [args]):
        with torch.no_grad():
            ref = model(*inputs)
        ref = list(ref) if isinstance(ref, (tuple, list)) else [ref]
        assert len(ref) == len(prog.output_names)
        in_args = []
        for j, t in enumerate(inputs):
            path = tmp_path / f"in{i}_{j}.npy"
            np.save(path, _to_npy(t))
            in_args.append(f"--input=@{path}")
        for mode in ("opt", "ref"):
            outs = [tmp_path / f"out{i}_{mode}_{k}.npy" for k in range(len(ref))]
            cmd = [RUN, src, f"--entry={prog.func_name}", "--runtime-stats", *in_args,
                   *[f"--output=@{o}" for o in outs]]
            if mode == "ref":
                cmd.append("--no-optimize")
            stats[(i, mode)] = _gemm_calls(_run(cmd).stdout)
            for k, (o, r) in enumerate(zip(outs, ref)):
                got = _from_npy(np.load(o), r.dtype)
                assert tuple(got.shape) == tuple(r.shape), (k, got.shape, r.shape)
                assert got.dtype == r.dtype, (k, got.dtype, r.dtype)
                g64, r64 = got.double(), r.detach().double()
                scale = max(1.0, float(r64.abs().max()))
                err = float((g64 - r64).abs().max()) if r64.numel() else 0.0
                tol = rtol or RTOL[r.dtype]
                REPORT.append(f"{label or model.__class__.__name__} run{i} {mode} out{k} "
                              f"{str(r.dtype)[6:]} {list(r.shape)}: max|err| = {err:.3g}"
                              f" (scale {scale:.3g})")
                assert torch.allclose(g64, r64, rtol=tol, atol=tol * scale), (
                    f"output {k} ({prog.output_names[k]}), {mode}: max |err| {err}")
        if gemms is not None:
            assert (stats[(i, "opt")], stats[(i, "ref")]) == gemms, stats
    return prog, (tmp_path / "opt.mlir").read_text(), text


@pytest.fixture(scope="module", autouse=True)
def _print_report():
    yield
    if REPORT:
        print("\n" + "\n".join(REPORT))


# ---------------------------------------------------------------------------
# Models
# ---------------------------------------------------------------------------

class QKV(nn.Module):
    """BERT-style attention projections (Linear with bias on [B, S, H])."""

    def __init__(self, hidden=64, kv=None):
        super().__init__()
        kv = kv or hidden
        self.q = nn.Linear(hidden, hidden)
        self.k = nn.Linear(hidden, kv)
        self.v = nn.Linear(hidden, kv)

    def forward(self, x):
        return self.q(x), self.k(x), self.v(x)


class QKVHeads(nn.Module):
    """q, k, v split into heads: [B, S, H] -> [B, heads, S, D]."""

    def __init__(self, hidden=64, heads=4):
        super().__init__()
        self.heads = heads
        self.q = nn.Linear(hidden, hidden)
        self.k = nn.Linear(hidden, hidden)
        self.v = nn.Linear(hidden, hidden)

    def forward(self, x):
        b, s, h = x.shape
        def split(t):
            return t.view(b, s, self.heads, h // self.heads).transpose(1, 2)
        q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
        return q * 0.125, k + v, v


class LlamaMLP(nn.Module):
    def __init__(self, hidden=32, inter=64):
        super().__init__()
        self.gate = nn.Linear(hidden, inter, bias=False)
        self.up = nn.Linear(hidden, inter, bias=False)
        self.down = nn.Linear(inter, hidden, bias=False)

    def forward(self, x):
        return self.down(F.silu(self.gate(x)) * self.up(x))


class LlamaStack(nn.Module):
    def __init__(self, layers=4, hidden=32, inter=64):
        super().__init__()
        self.layers = nn.ModuleList(LlamaMLP(hidden, inter) for _ in range(layers))

    def forward(self, x):
        for layer in self.layers:
            x = x + layer(x)
        return x


class LoRALinear(nn.Module):
    def __init__(self, hidden=64, rank=4, scale=0.5):
        super().__init__()
        self.base = nn.Linear(hidden, hidden)
        self.A = nn.Linear(hidden, rank, bias=False)
        self.B = nn.Linear(rank, hidden, bias=False)
        nn.init.normal_(self.B.weight, std=0.1)      # peft starts B at 0
        self.scale = scale

    def forward(self, x):
        return self.base(x) + self.scale * self.B(self.A(x))


class Layout(nn.Module):
    """split / chunk / cat / permute / reshape / transpose / bmm."""

    def __init__(self, hidden=32, heads=4):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.proj = nn.Linear(hidden, hidden)

    def forward(self, x):
        b, s, h = x.shape
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        a, c = torch.split(q, [h // 4, 3 * h // 4], dim=-1)
        qc = torch.cat([c, a], dim=-1)                                # [b, s, h]
        heads = qc.reshape(b, s, self.heads, h // self.heads).permute(0, 2, 1, 3)
        back = heads.permute(0, 2, 1, 3).reshape(b, s, h)
        scores = torch.matmul(k, v.transpose(1, 2))                   # bmm [b, s, s]
        return self.proj(back), heads.contiguous(), scores, x.transpose(0, 1) + 1.0


class Activations(nn.Module):
    def __init__(self, hidden=32):
        super().__init__()
        self.l1 = nn.Linear(hidden, hidden)
        self.l2 = nn.Linear(hidden, hidden)
        self.w = nn.Parameter(torch.randn(hidden, hidden) / hidden ** 0.5)
        self.register_buffer("gain", torch.tensor(1.5))

    def forward(self, x):
        y = F.gelu(self.l1(x))
        z = F.gelu(self.l2(x), approximate="tanh")
        r = torch.relu(torch.mm(x, self.w.t()) - 0.25) * self.gain
        s = torch.sigmoid(y) + torch.tanh(z) / 2
        h = (y.to(torch.float16) * 2).to(torch.float32)
        return y, z, r, s, torch.addmm(self.l1.bias, x, self.w, beta=0.5, alpha=2.0), h


class WithSoftmax(nn.Module):
    def __init__(self, hidden=32):
        super().__init__()
        self.q = nn.Linear(hidden, hidden)

    def forward(self, x):
        return torch.softmax(self.q(x), dim=-1)


def _x(*shape, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g).to(dtype)


# ---------------------------------------------------------------------------
# Tests
# ---------------------------------------------------------------------------

def test_api_and_linear_form():
    torch.manual_seed(0)
    prog = import_program(export(QKV(16, 8), [_x(2, 3, 16)]))
    assert prog.func_name == "forward"
    assert prog.input_names == ["x"] and prog.input_types == ["2x3x16xf32"]
    assert len(prog.output_names) == 3 and prog.num_constants == 6
    ir = prog.ir
    assert "func.func @forward(%x: tensor<2x3x16xf32>" in ir
    # One collapse of x shared by the three matmuls, transposed-B maps on the
    # [out, in] weight constants, zero fills, row-broadcast bias-adds.
    assert ir.count("tensor.collapse_shape %x [[0, 1], [2]]") == 1
    assert ir.count("linalg.matmul indexing_maps = [#map, #map1, #map2] ins(%collapsed,") == 3
    assert "#map1 = affine_map<(d0, d1, d2) -> (d1, d2)>" in ir
    assert "arith.constant dense_resource<q_weight> : tensor<16x16xf32>" in ir
    assert "tensor.expand_shape" in ir and "output_shape [2, 3, 8]" in ir
    assert re.search(r'q_weight: "0x04000000[0-9A-F]{2048}"', ir)
    assert re.search(r'loc\("linear"\("[^"]*' + THIS + r'":\d+:\d+\)\)', ir)


def test_resource_blob_format():
    """4-byte little-endian alignment word, then the little-endian bytes."""
    class Ret(nn.Module):
        def __init__(self, dtype):
            super().__init__()
            self.w = nn.Parameter(torch.tensor([[1.0, -2.0], [0.5, 3.0]], dtype=dtype))

        def forward(self, x):
            return torch.mm(x, self.w)

    want = {torch.float32: "0x040000000000803F000000C00000003F00004040",
            torch.float16: "0x02000000003C00C000380042",
            torch.bfloat16: "0x02000000803F00C0003F4040"}
    for dtype, blob in want.items():
        ir = import_program(export(Ret(dtype), [torch.ones(3, 2, dtype=dtype)])).ir
        assert f'w: "{blob}"' in ir, ir


@pytest.mark.parametrize("decompose", [False, True], ids=["export", "decomposed"])
def test_qkv_bias(tmp_path, decompose):
    torch.manual_seed(1)
    _, opt, _ = check(tmp_path, QKV(64, 32), [_x(2, 5, 64)], decompose=decompose,
                      remarks=[r"merged 3 matmuls sharing %\S+ \(with their bias-adds\)"],
                      gemms=(1, 3), label=f"qkv[{'dec' if decompose else 'exp'}]")
    assert opt.count("linalg.matmul") == 1


def test_qkv_heads(tmp_path):
    torch.manual_seed(2)
    check(tmp_path, QKVHeads(64, 4), [_x(2, 5, 64)], decompose=True,
          remarks=[r"merged 3 matmuls"], gemms=(1, 3), label="qkv-heads")


@pytest.mark.parametrize("decompose", [False, True], ids=["export", "decomposed"])
def test_llama_mlp(tmp_path, decompose):
    torch.manual_seed(3)
    check(tmp_path, LlamaMLP(32, 64), [_x(2, 6, 32)], decompose=decompose,
          remarks=[r"merged 2 matmuls sharing"], gemms=(2, 3),
          label=f"llama-mlp[{'dec' if decompose else 'exp'}]")


def test_llama_stack(tmp_path):
    torch.manual_seed(4)
    _, _, text = check(tmp_path, LlamaStack(4, 32, 64), [_x(2, 6, 32)],
                       remarks=[r"merged 2 matmuls sharing"], gemms=(8, 12),
                       label="llama-stack")
    assert len(re.findall(r"merged 2 matmuls", text)) == 4


@pytest.mark.parametrize("decompose", [False, True], ids=["export", "decomposed"])
def test_lora(tmp_path, decompose):
    torch.manual_seed(5)
    _, opt, _ = check(tmp_path, LoRALinear(64, 4, 0.5), [_x(2, 5, 64)], decompose=decompose,
                      remarks=[r"folded a sum of linear branches \(LoRA\)"], gemms=(1, 3),
                      label=f"lora[{'dec' if decompose else 'exp'}]")
    assert opt.count("linalg.matmul") == 1


@pytest.mark.parametrize("model", ["qkv", "llama"])
def test_dynamic_batch_and_seq(tmp_path, model):
    torch.manual_seed(6)
    if model == "qkv":
        m, h = QKV(64, 16), 64       # GQA-like narrower k/v
        want = r"merged 3 matmuls sharing %\S+ \(with their bias-adds\) into one \?x96 GEMM"
        gemms = (1, 3)
    else:
        m, h = LlamaMLP(32, 64), 32
        want = r"merged 2 matmuls sharing %\S+ into one \?x128 GEMM"
        gemms = (2, 3)
    batch, seq = torch.export.Dim("batch", max=64), torch.export.Dim("seq", max=512)
    prog, _, _ = check(tmp_path, m, [_x(2, 5, h)],
                       dynamic_shapes={"x": {0: batch, 1: seq}},
                       runs=[[_x(3, 7, h, seed=1)], [_x(1, 11, h, seed=2)]],
                       remarks=[want], gemms=gemms, label=f"dynamic-{model}")
    assert prog.input_types == [f"?x?x{h}xf32"]


def test_dynamic_batch_only(tmp_path):
    torch.manual_seed(7)
    batch = torch.export.Dim("batch", max=64)
    prog, _, _ = check(tmp_path, QKVHeads(32, 2), [_x(2, 5, 32)],
                       dynamic_shapes={"x": {0: batch}},
                       runs=[[_x(4, 5, 32, seed=3)], [_x(1, 5, 32, seed=4)]],
                       remarks=[r"merged 3 matmuls"], gemms=(1, 3), label="dynamic-batch")
    assert prog.input_types == ["?x5x32xf32"]
    assert "tensor.expand_shape" in prog.ir


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["f16", "bf16"])
def test_low_precision(tmp_path, dtype):
    torch.manual_seed(8)
    m = LlamaMLP(32, 64).to(dtype)
    prog, _, _ = check(tmp_path, m, [_x(2, 6, 32, dtype=dtype)],
                       remarks=[r"merged 2 matmuls"], gemms=(2, 3),
                       label=f"llama-{str(dtype)[6:]}")
    short = {torch.float16: "f16", torch.bfloat16: "bf16"}[dtype]
    assert prog.input_types == [f"2x6x32x{short}"]
    assert re.search(r'gate_weight: "0x02000000[0-9A-F]{8192}"', prog.ir)
    q = QKV(32, 32).to(dtype)
    check(tmp_path, q, [_x(3, 4, 32, dtype=dtype, seed=5)], decompose=True,
          remarks=[r"merged 3 matmuls"], gemms=(1, 3), label=f"qkv-{short}")


def test_resource_bytes_roundtrip(tmp_path):
    """The blob holds the weights' exact bits: a model returning its weight."""
    class Ret(nn.Module):
        def __init__(self, dtype):
            super().__init__()
            self.w = nn.Parameter(torch.randn(3, 5).to(dtype))

        def forward(self, x):
            return x + self.w

    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        m = Ret(dtype)
        check(tmp_path, m, [torch.zeros(3, 5, dtype=dtype)], rtol=0.0,
              label=f"bytes-{str(dtype)[6:]}")


@pytest.mark.parametrize("decompose", [False, True], ids=["export", "decomposed"])
def test_layout_ops(tmp_path, decompose):
    torch.manual_seed(9)
    check(tmp_path, Layout(32, 4), [_x(2, 5, 32)], decompose=decompose,
          label=f"layout[{'dec' if decompose else 'exp'}]")


@pytest.mark.parametrize("decompose", [False, True], ids=["export", "decomposed"])
def test_activations(tmp_path, decompose):
    torch.manual_seed(10)
    check(tmp_path, Activations(32), [_x(6, 32)], decompose=decompose,
          label=f"activations[{'dec' if decompose else 'exp'}]")


@pytest.mark.parametrize("decompose", [False, True], ids=["export", "decomposed"])
def test_softmax_unsupported(decompose):
    ep = export(WithSoftmax(), [_x(2, 3, 32)], decompose=decompose)
    with pytest.raises(UnsupportedOperatorError) as info:
        import_program(ep)
    msg = str(info.value)
    assert re.search(r"aten\._?softmax\.\w+ is not supported", msg), msg
    assert THIS in msg and "supported: " in msg and "aten.linear" in msg
    assert info.value.op.startswith(("aten.softmax", "aten._softmax"))


def test_two_dynamic_sizes_in_one_expand_group(tmp_path):
    # MLIR 22's --expand-strided-metadata crashes on such a group
    # (llvm-project #186830); linfuse's lowering rewrites it first.
    src = tmp_path / "expand.mlir"
    src.write_text("""
func.func @main(%x: tensor<?x?x2xf32>) -> tensor<?x?x2xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %b = tensor.dim %x, %c0 : tensor<?x?x2xf32>
  %s = tensor.dim %x, %c1 : tensor<?x?x2xf32>
  %f = tensor.collapse_shape %x [[0, 1], [2]] : tensor<?x?x2xf32> into tensor<?x2xf32>
  %r = tensor.expand_shape %f [[0, 1], [2]] output_shape [%b, %s, 2] : tensor<?x2xf32> into tensor<?x?x2xf32>
  return %r : tensor<?x?x2xf32>
}
""")
    p = subprocess.run([str(OPT), str(src), "--linfuse-lower-to-cpu", "-o", os.devnull],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr[-2000:]


class EmptySlice(nn.Module):
    """Phi-3's partial rotary embedding with the rotary dimension the whole
    head: x[..., 32:] of a 32-wide last dimension is empty."""

    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(32, 32)

    def forward(self, x):
        y = self.proj(x)
        rot, rest = y[..., :32], y[..., 32:]
        return torch.cat((rot * 2.0, rest), dim=-1)


@pytest.mark.parametrize("decompose", [False, True], ids=["export", "decomposed"])
def test_empty_slice(tmp_path, decompose):
    # extract_slice refuses an offset one past the end, even for no values:
    # the importer makes the empty slice an empty tensor.
    torch.manual_seed(11)
    check(tmp_path, EmptySlice(), [_x(3, 32)], decompose=decompose,
          label=f"empty-slice[{'dec' if decompose else 'exp'}]")
