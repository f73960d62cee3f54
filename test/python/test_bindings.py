"""The linfuse package on MLIR text: optimize / lower / run_pipeline with
their reports, compile and call on numpy arrays and torch tensors, errors."""

import numpy as np
import pytest

import linfuse

# Q/K/V with bias in nn.Linear layout on a dynamic batch; weights are
# `linfuse.weight` arguments (packed once by @main__pack).
QKV = """
#x = affine_map<(d0, d1, d2) -> (d0, d2)>
#w = affine_map<(d0, d1, d2) -> (d1, d2)>
#y = affine_map<(d0, d1, d2) -> (d0, d1)>
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d1)>
func.func private @linear(%x: tensor<?x32xf32>, %w: tensor<16x32xf32>, %b: tensor<16xf32>) -> tensor<?x16xf32> {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %m = tensor.dim %x, %c0 : tensor<?x32xf32>
  %e = tensor.empty(%m) : tensor<?x16xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<?x16xf32>) -> tensor<?x16xf32>
  %mm = linalg.matmul indexing_maps = [#x, #w, #y] ins(%x, %w : tensor<?x32xf32>, tensor<16x32xf32>) outs(%f : tensor<?x16xf32>) -> tensor<?x16xf32>
  %r = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]} ins(%mm, %b : tensor<?x16xf32>, tensor<16xf32>) outs(%e : tensor<?x16xf32>) {
  ^bb0(%a: f32, %bb: f32, %o: f32):
    %s = arith.addf %a, %bb : f32
    linalg.yield %s : f32
  } -> tensor<?x16xf32>
  return %r : tensor<?x16xf32>
}
func.func @qkv(%x: tensor<?x32xf32>,
               %wq: tensor<16x32xf32> {linfuse.weight}, %bq: tensor<16xf32> {linfuse.weight},
               %wk: tensor<16x32xf32> {linfuse.weight}, %bk: tensor<16xf32> {linfuse.weight},
               %wv: tensor<16x32xf32> {linfuse.weight}, %bv: tensor<16xf32> {linfuse.weight})
    -> (tensor<?x16xf32>, tensor<?x16xf32>, tensor<?x16xf32>) {
  %q = func.call @linear(%x, %wq, %bq) : (tensor<?x32xf32>, tensor<16x32xf32>, tensor<16xf32>) -> tensor<?x16xf32>
  %k = func.call @linear(%x, %wk, %bk) : (tensor<?x32xf32>, tensor<16x32xf32>, tensor<16xf32>) -> tensor<?x16xf32>
  %v = func.call @linear(%x, %wv, %bv) : (tensor<?x32xf32>, tensor<16x32xf32>, tensor<16xf32>) -> tensor<?x16xf32>
  return %q, %k, %v : tensor<?x16xf32>, tensor<?x16xf32>, tensor<?x16xf32>
}
func.func @scale(%x: tensor<4xf16>) -> tensor<4xf16> {
  %e = tensor.empty() : tensor<4xf16>
  %r = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]} ins(%x : tensor<4xf16>) outs(%e : tensor<4xf16>) {
  ^bb0(%a: f16, %o: f16):
    %s = arith.addf %a, %a : f16
    linalg.yield %s : f16
  } -> tensor<4xf16>
  return %r : tensor<4xf16>
}
"""

BF16_MATMUL = """
func.func @mm(%a: tensor<?x8xbf16>, %b: tensor<8x4xbf16>) -> tensor<?x4xf32> {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %m = tensor.dim %a, %c0 : tensor<?x8xbf16>
  %e = tensor.empty(%m) : tensor<?x4xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<?x4xf32>) -> tensor<?x4xf32>
  %r = linalg.matmul ins(%a, %b : tensor<?x8xbf16>, tensor<8x4xbf16>) outs(%f : tensor<?x4xf32>) -> tensor<?x4xf32>
  return %r : tensor<?x4xf32>
}
"""


def qkv_weights(rng):
    return [rng.standard_normal(s).astype(np.float32) * 0.2
            for s in [(16, 32), (16,), (16, 32), (16,), (16, 32), (16,)]]


def qkv_reference(x, ws):
    return [x @ ws[i].T + ws[i + 1] for i in (0, 2, 4)]


# --- optimize / lower / run_pipeline ---------------------------------------

def test_optimize_merges_and_reports_as_data():
    text, report = linfuse.optimize(QKV, return_report=True)
    assert isinstance(text, str)
    # The three projections became one matmul over a 48-wide weight.
    assert text.count("linalg.matmul") == 1
    assert "tensor<48x32xf32>" in text
    assert len(report.merges) == 1
    merge = report.merges[0]
    assert merge.kind == "merge"
    assert merge.pass_name == "linfuse-merge-parallel-matmuls"
    assert merge.details == {"count": 3, "shared": "%arg0", "shape": "?x48"}
    assert merge.file == "<input>" and merge.line > 0
    assert report.statistics["linfuse-merge-parallel-matmuls"]["matmuls-removed"] == 2
    assert "merged 3 matmuls" in str(report)


def test_optimize_output_round_trips():
    once = linfuse.optimize(QKV)
    # The output parses again and is a fixpoint of the pipeline.
    assert linfuse.optimize(once) == once
    assert linfuse.run_pipeline(once, "builtin.module(canonicalize)") == once


def test_optimize_options():
    lifted = linfuse.optimize(QKV, lift_weights=True)
    assert "func.func @qkv__pack" in lifted
    assert "func.func @qkv__pack" not in linfuse.optimize(QKV, lift_weights=False)
    with pytest.raises(linfuse.Error, match="no such option bogus"):
        linfuse.optimize(QKV, bogus=1)


def test_run_pipeline_single_pass():
    text, report = linfuse.run_pipeline(
        QKV, "builtin.module(inline, func.func(linfuse-merge-parallel-matmuls))",
        return_report=True)
    assert text.count("linalg.matmul") == 1
    assert [r.kind for r in report.remarks] == ["merge"]
    # The passes alone work too (anchored on the module).
    assert "@linear" not in linfuse.run_pipeline(QKV, "inline")
    assert "@linear" in linfuse.run_pipeline(QKV, "func.func(cse)")
    with pytest.raises(linfuse.Error, match="bad pass pipeline"):
        linfuse.run_pipeline(QKV, "builtin.module(no-such-pass)")


def test_lower_to_cpu_calls_the_runtime():
    text, report = linfuse.lower(linfuse.optimize(QKV), "cpu", return_report=True)
    assert "llvm.func @linfuse_cpu_gemm_f32_f32" in text
    assert "linalg." not in text
    assert any(r.kind == "gemm" for r in report.remarks)


def test_parse_errors_carry_the_diagnostic():
    with pytest.raises(linfuse.Error, match=r"^<input>:1:13: "):
        linfuse.optimize("func.func @f(")
    with pytest.raises(linfuse.Error, match=r"^<input>:1:23: Dialect `bogus' not found"):
        linfuse.compile("func.func @f() { %0 = bogus.op : i32 return }")


def test_verifier_errors_are_errors():
    bad = """func.func @f(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>) -> tensor<4x8xf32> {
      %r = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<4x8xf32>) outs(%a : tensor<4x8xf32>) -> tensor<4x8xf32>
      return %r : tensor<4x8xf32>
    }"""
    with pytest.raises(linfuse.Error, match="<input>:2:"):
        linfuse.optimize(bad)


def test_input_an_upstream_verifier_crashes_on_is_an_error():
    # MLIR 22's tensor.concat verifier indexes shapes with a negative dim
    # (a segfault that would take the Python process with it).
    bad = """func.func @f(%w: tensor<4x4xf32>) -> tensor<4x4xf32> {
      %c = tensor.concat dim(-1) %w : (tensor<4x4xf32>) -> tensor<4x4xf32>
      return %c : tensor<4x4xf32>
    }"""
    for run in (linfuse.optimize, linfuse.compile):
        with pytest.raises(linfuse.Error,
                           match=r"<input>:2:12: 'tensor.concat' op concatenation dim "
                                 r"must be non-negative, got -1"):
            run(bad)


def test_bad_target():
    with pytest.raises(linfuse.Error, match="must be cpu or cuda"):
        linfuse.lower(QKV, "tpu")


def test_cuda_graph_is_a_cuda_option():
    with pytest.raises(linfuse.Error,
                       match=r"CUDA graphs \(--cuda-graph\) need --target=cuda"):
        linfuse.compile(QKV, "cpu", cuda_graph=True)


# --- compile and call -------------------------------------------------------

def test_compile_lists_public_functions():
    module = linfuse.compile(QKV)
    assert sorted(module.functions) == ["qkv", "scale"]   # @linear is private
    assert module.qkv.arguments[:2] == ["?x32xf32", "16x32xf32 (weight)"]
    assert module.qkv.results == ["?x16xf32"] * 3
    assert module.qkv.num_weights == 6
    assert len(module.report.merges) == 1
    with pytest.raises(AttributeError, match="no public function @linear"):
        module.linear
    with pytest.raises(linfuse.Error, match="2 public functions"):
        module(np.zeros(4, np.float16))


@pytest.mark.parametrize("rows", [1, 7, 64])
def test_numerics_against_numpy_dynamic_batch(rng, rows):
    fn = linfuse.compile(QKV, entry="qkv").qkv
    ws = qkv_weights(rng)
    x = rng.standard_normal((rows, 32)).astype(np.float32)
    linfuse.runtime_stats(reset=True)
    got = fn(x, *ws)
    assert linfuse.runtime_stats()["gemm_calls"] == 1
    for g, want in zip(got, qkv_reference(x, ws)):
        assert g.shape == (rows, 16) and g.dtype == np.float32
        np.testing.assert_allclose(g, want, rtol=1e-5, atol=1e-5)


def test_unoptimized_reference_agrees(rng):
    ws = qkv_weights(rng)
    x = rng.standard_normal((5, 32)).astype(np.float32)
    ref = linfuse.compile(QKV, entry="qkv", optimize=False).qkv
    opt = linfuse.compile(QKV, entry="qkv").qkv
    linfuse.runtime_stats(reset=True)
    want = ref(x, *ws)
    assert linfuse.runtime_stats(reset=True)["gemm_calls"] == 3
    got = opt(x, *ws)
    assert linfuse.runtime_stats()["gemm_calls"] == 1
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def test_weights_packed_once(rng):
    fn = linfuse.compile(QKV, entry="qkv").qkv
    ws = qkv_weights(rng)
    fn.load_weights(*ws)
    for rows in (3, 9):
        x = rng.standard_normal((rows, 32)).astype(np.float32)
        for g, want in zip(fn(x), qkv_reference(x, ws)):
            np.testing.assert_allclose(g, want, rtol=1e-5, atol=1e-5)
    # Every argument still works (packs for that call only).
    x = rng.standard_normal((2, 32)).astype(np.float32)
    other = qkv_weights(rng)
    for g, want in zip(fn(x, *other), qkv_reference(x, other)):
        np.testing.assert_allclose(g, want, rtol=1e-5, atol=1e-5)
    with pytest.raises(linfuse.Error, match="takes 1 inputs besides its packed weights, got 2"):
        fn(x, x)
    with pytest.raises(linfuse.Error, match="takes 6 weights, got 1"):
        fn.load_weights(ws[0])


def test_instances_run_the_same_code_with_their_own_weights(rng):
    fn = linfuse.compile(QKV, entry="qkv").qkv
    copies = [fn, fn.instance(), fn.instance().instance()]
    assert [c.instance_of for c in copies[:2]] == [None, fn]
    assert copies[2].instance_of is not None and copies[2].instance_of.instance_of is fn
    assert all(c.report.merges and len(c.report.merges) == len(fn.report.merges)
               for c in copies)
    assert all(c.arguments == fn.arguments and c.results == fn.results for c in copies)
    assert all(c.concatenated_weights == fn.concatenated_weights for c in copies)
    weights = [qkv_weights(rng) for _ in copies]
    for c, ws in zip(copies, weights):
        assert not c._native.weights_packed
        c.load_weights(*ws)
    # Each keeps its own packed weights, whichever ran last.
    for _ in range(2):
        for c, ws in zip(copies, weights):
            x = rng.standard_normal((5, 32)).astype(np.float32)
            for g, want in zip(c(x), qkv_reference(x, ws)):
                np.testing.assert_allclose(g, want, rtol=1e-5, atol=1e-5)
    # The code outlives the function it was compiled as.
    last = copies[2]
    del copies, fn
    x = rng.standard_normal((3, 32)).astype(np.float32)
    for g, want in zip(last(x), qkv_reference(x, weights[2])):
        np.testing.assert_allclose(g, want, rtol=1e-5, atol=1e-5)


@pytest.mark.skipif(not linfuse.cuda_enabled(), reason="built without CUDA: "
                    "no CUDA target to refuse instances of")
def test_instances_are_cpu_only():
    fn = linfuse.compile(QKV, target="cuda", entry="qkv").qkv
    with pytest.raises(linfuse.Error, match="only code compiled for the CPU"):
        fn.instance()


def test_structure_ignores_locations_and_weight_names():
    ir = QKV.replace("%wq: tensor<16x32xf32> {linfuse.weight}",
                     '%wq: tensor<16x32xf32> {linfuse.weight, linfuse.name = "a.q"}')
    renamed = (ir.replace('"a.q"', '"b.q"').replace("%wq", "%q_weight")
               .replace("%m = tensor.dim %x, %c0 : tensor<?x32xf32>",
                        '%m = tensor.dim %x, %c0 : tensor<?x32xf32> loc("layer7")'))
    structure = linfuse._linfuse.structure
    assert structure(ir) == structure(renamed) == structure(QKV)
    assert "layer7" not in structure(renamed) and "a.q" not in structure(ir)
    # Anything else that changes the code changes it.
    for other in (ir.replace("16x32xf32", "16x33xf32").replace("?x32xf32", "?x33xf32"),
                  ir.replace("arith.addf %a, %bb", "arith.mulf %a, %bb"),
                  ir.replace("{linfuse.weight, linfuse.name", "{linfuse.name")):
        assert structure(other) != structure(ir)
    with pytest.raises(linfuse.Error):
        structure("func.func @f(")


def test_input_errors(rng):
    fn = linfuse.compile(QKV, entry="qkv").qkv
    ws = qkv_weights(rng)
    x = np.zeros((4, 32), np.float32)
    with pytest.raises(linfuse.Error, match="takes 7 inputs, got 1"):
        fn(x)
    with pytest.raises(linfuse.Error, match=r"input 0: expected \?x32xf32, got 4x31xf32"):
        fn(np.zeros((4, 31), np.float32), *ws)
    with pytest.raises(linfuse.Error, match=r"input 1: expected 16x32xf32, got 16x32xf64"):
        fn(x, ws[0].astype(np.float64), *ws[1:])
    with pytest.raises(linfuse.Error, match="numpy dtype complex64 is not supported"):
        fn(x.astype(np.complex64), *ws)
    with pytest.raises(linfuse.Error, match="input 0: cannot be read as an array|numpy dtype"):
        fn("not an array", *ws)


def test_non_contiguous_and_list_inputs(rng):
    fn = linfuse.compile(QKV, entry="qkv").qkv
    ws = qkv_weights(rng)
    wide = rng.standard_normal((6, 64)).astype(np.float32)
    x = wide[:, ::2]                      # strided view: copied once into C order
    assert not x.flags.c_contiguous
    for g, want in zip(fn(x, *ws), qkv_reference(np.ascontiguousarray(x), ws)):
        np.testing.assert_allclose(g, want, rtol=1e-5, atol=1e-5)
    f16 = linfuse.compile(QKV, entry="scale")
    np.testing.assert_array_equal(f16(np.array([1, 2, 3, 4], np.float16)), [2, 4, 6, 8])


def test_results_own_their_memory(rng):
    # q, k and v are returned in place (--linfuse-return-views): strided
    # views of the merged GEMM's output, sharing it but no element, kept
    # alive by whichever of them lives longest.
    fn = linfuse.compile(QKV, entry="qkv").qkv
    ws = qkv_weights(rng)
    x = rng.standard_normal((3, 32)).astype(np.float32)
    q, k, v = fn(x, *ws)
    want = qkv_reference(x, ws)
    assert not q.flags.c_contiguous and q.strides == (48 * 4, 4)
    assert np.may_share_memory(q, k) and not np.shares_memory(q, k)
    assert not np.shares_memory(k, v)
    del fn                                # results outlive the function
    import gc
    gc.collect()
    np.testing.assert_allclose(v, want[2], rtol=1e-5, atol=1e-5)
    q[:] = 0                              # writable, and independent of k
    del q                                 # k and v keep the buffer alive
    gc.collect()
    np.testing.assert_allclose(k, want[1], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(v, want[2], rtol=1e-5, atol=1e-5)


def test_torch_tensors_through_dlpack(rng):
    import torch
    fn = linfuse.compile(QKV, entry="qkv").qkv
    ws = qkv_weights(rng)
    x = torch.randn(5, 32)
    got = fn(x, *[torch.from_numpy(w) for w in ws])
    for g, want in zip(got, qkv_reference(x.numpy(), ws)):
        np.testing.assert_allclose(g, want, rtol=1e-5, atol=1e-5)
    with pytest.raises(linfuse.Error, match="not contiguous"):
        fn(torch.randn(32, 5).t(), *ws)


def test_bf16_through_dlpack_and_uint16(rng):
    import torch
    fn = linfuse.compile(BF16_MATMUL).mm
    a = torch.randn(3, 8).to(torch.bfloat16)
    b = torch.randn(8, 4).to(torch.bfloat16)
    want = (a.float() @ b.float()).numpy()
    np.testing.assert_allclose(fn(a, b), want, rtol=1e-5, atol=1e-5)
    # numpy has no bf16: uint16 arrays carry the bits.
    bits = [t.view(torch.int16).numpy().view(np.uint16) for t in (a, b)]
    np.testing.assert_allclose(fn(*bits), want, rtol=1e-5, atol=1e-5)


def test_cuda_target_without_device_is_an_error(rng):
    if not linfuse.cuda_enabled():
        with pytest.raises(linfuse.Error, match="without the CUDA toolkit"):
            linfuse.compile(QKV, target="cuda", entry="qkv")
        return
    from conftest import HAS_CUDA_DEVICE
    if HAS_CUDA_DEVICE:
        pytest.skip("a GPU is present (see test_cuda_target_numerics)")
    fn = linfuse.compile(QKV, target="cuda", entry="qkv").qkv
    with pytest.raises(linfuse.Error, match="no CUDA"):
        fn(np.zeros((2, 32), np.float32), *qkv_weights(rng))


@pytest.mark.cuda_device
def test_cuda_target_numerics(rng):
    fn = linfuse.compile(QKV, target="cuda", entry="qkv").qkv
    ws = qkv_weights(rng)
    x = rng.standard_normal((33, 32)).astype(np.float32)
    for g, want in zip(fn(x, *ws), qkv_reference(x, ws)):
        np.testing.assert_allclose(g, want, rtol=1e-3, atol=1e-3)


ROW_SUMS = """
func.func @row_sums(%x: tensor<?x1024xf32>, %w: tensor<1024x1xf32>) -> tensor<?x1xf32> {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %m = tensor.dim %x, %c0 : tensor<?x1024xf32>
  %e = tensor.empty(%m) : tensor<?x1xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<?x1xf32>) -> tensor<?x1xf32>
  %r = linalg.matmul ins(%x, %w : tensor<?x1024xf32>, tensor<1024x1xf32>) outs(%f : tensor<?x1xf32>) -> tensor<?x1xf32>
  return %r : tensor<?x1xf32>
}
"""


def _peak_rss_mib():
    import resource
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


@pytest.mark.parametrize("kind", ["numpy", "torch"])
def test_large_inputs_are_read_in_place(kind):
    # A 512 MiB input: a copy would raise the process's peak memory by as
    # much; read in place, the call adds its 512 KiB result and what OpenBLAS
    # allocates for itself on a first large GEMM (80 MiB seen on AMD EPYC,
    # 224 MiB on an AVX-512 Xeon).
    fn = linfuse.compile(ROW_SUMS).row_sums
    rows = 128 * 1024
    if kind == "torch":
        import torch
        x = torch.ones(rows, 1024)
        w = torch.full((1024, 1), 0.5)
    else:
        x = np.ones((rows, 1024), np.float32)
        w = np.full((1024, 1), 0.5, np.float32)
    x[:] = 1          # touch every page before measuring the peak
    fn(x[:8], w)      # and let OpenBLAS allocate its buffers
    before = _peak_rss_mib()
    y = fn(x, w)
    grown = _peak_rss_mib() - before
    assert y.shape == (rows, 1) and float(y[-1, 0]) == 512.0
    assert grown < 384, f"peak memory grew by {grown:.0f} MiB during the call"


def test_loaded_weights_are_kept_alive(rng):
    # Fortran-order weights are copied into C order once; the copies must
    # live as long as the loading (they are read on every call), also
    # without a packing function (optimize=False).
    import gc
    ws = qkv_weights(rng)
    for optimize in (True, False):
        fn = linfuse.compile(QKV, entry="qkv", optimize=optimize).qkv
        fn.load_weights(*[np.asfortranarray(w) for w in ws])
        gc.collect()
        garbage = [np.full((64, 64), 7e7, np.float32) for _ in range(64)]
        x = rng.standard_normal((4, 32)).astype(np.float32)
        for g, want in zip(fn(x), qkv_reference(x, ws)):
            np.testing.assert_allclose(g, want, rtol=1e-5, atol=1e-5)
        del garbage


def test_failed_load_weights_keeps_the_previous_ones(rng):
    fn = linfuse.compile(QKV, entry="qkv").qkv
    ws = qkv_weights(rng)
    fn.load_weights(*ws)
    # (Numbered as @qkv's arguments: the first weight is argument 1.)
    with pytest.raises(linfuse.Error, match="input 1: expected 16x32xf32, got 16x32xf64"):
        fn.load_weights(ws[0].astype(np.float64), *ws[1:])
    x = rng.standard_normal((2, 32)).astype(np.float32)
    for g, want in zip(fn(x), qkv_reference(x, ws)):
        np.testing.assert_allclose(g, want, rtol=1e-5, atol=1e-5)


TWICE = """
func.func @twice(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %e = tensor.empty() : tensor<4xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]} ins(%x : tensor<4xf32>) outs(%e : tensor<4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %s = arith.addf %a, %a : f32
    linalg.yield %s : f32
  } -> tensor<4xf32>
  return %r, %r : tensor<4xf32>, tensor<4xf32>
}
"""


def test_results_never_share_memory():
    a, b = linfuse.compile(TWICE).twice(np.arange(4, dtype=np.float32))
    assert not np.shares_memory(a, b)
    a[:] = -1
    np.testing.assert_array_equal(b, [0, 2, 4, 6])


def test_concurrent_optimize_reports_are_complete():
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(4) as pool:
        reports = list(pool.map(lambda _: linfuse.optimize(QKV, return_report=True)[1],
                                range(72)))
    assert [len(r.merges) for r in reports] == [1] * 72
    # Statistics too: each report counts its own pipeline only, not the
    # others running meanwhile (as linfuse.torch compiles partitions).
    alone = linfuse.optimize(QKV, return_report=True)[1].statistics
    assert alone and all(r.statistics == alone for r in reports), \
        [r.statistics for r in reports if r.statistics != alone][:1]


def test_tensor_requiring_grad_is_a_clear_error(rng):
    import torch
    fn = linfuse.compile(QKV, entry="scale").scale
    with pytest.raises(linfuse.Error, match="input 0: the tensor requires grad"):
        fn(torch.ones(4, dtype=torch.float16, requires_grad=True))


ASSERTING = """
func.func @checked(%x: tensor<?xf32>) -> tensor<?xf32> {
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %d = tensor.dim %x, %c0 : tensor<?xf32>
  %ok = arith.cmpi eq, %d, %c2 : index
  cf.assert %ok, "expected 2 elements"
  return %x : tensor<?xf32>
}
"""


def test_failed_assertion_is_an_error_not_an_abort():
    fn = linfuse.compile(ASSERTING).checked
    with pytest.raises(linfuse.Error, match="@checked: an assertion in the compiled code "
                       "failed: expected 2 elements"):
        fn(np.ones(3, np.float32))
    # The next call runs normally.
    np.testing.assert_array_equal(fn(np.full(2, 4, np.float32)), [4, 4])


def test_missed_merges_are_reported_with_why():
    ir = """
func.func @main(%x: tensor<4x4xf32>, %w1: tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>) {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x4xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<4x4xf32>) -> tensor<4x4xf32>
  %a = linalg.matmul ins(%x, %w1 : tensor<4x4xf32>, tensor<4x4xf32>) outs(%f : tensor<4x4xf32>) -> tensor<4x4xf32>
  %b = linalg.matmul ins(%x, %a : tensor<4x4xf32>, tensor<4x4xf32>) outs(%f : tensor<4x4xf32>) -> tensor<4x4xf32>
  return %a, %b : tensor<4x4xf32>, tensor<4x4xf32>
}
"""
    _, report = linfuse.optimize(ir, return_report=True)
    assert report.merges == []
    (missed,) = report.of_kind("not-merged")
    assert missed.line == 7 and missed.details["shared"] == "%arg0"
    assert missed.details["other"] == "<input>:6:8"
    assert missed.details["why"] == "one depends on the other"


def test_specialized_contractions_are_reported():
    ir = """
#mk = affine_map<(m, n, k) -> (m, k)>
#nk = affine_map<(m, n, k) -> (n, k)>
#mn = affine_map<(m, n, k) -> (m, n)>
func.func @main(%x: tensor<4x8xf16>, %w: tensor<16x8xf16>, %acc: tensor<4x16xf32>, %v: tensor<8xf32>, %u: tensor<8xf32>, %d: tensor<f32>) -> (tensor<4x16xf32>, tensor<f32>) {
  %r = linalg.generic {indexing_maps = [#mk, #nk, #mn], iterator_types = ["parallel", "parallel", "reduction"]} ins(%x, %w : tensor<4x8xf16>, tensor<16x8xf16>) outs(%acc : tensor<4x16xf32>) {
  ^bb0(%a: f16, %b: f16, %c: f32):
    %ea = arith.extf %a : f16 to f32
    %eb = arith.extf %b : f16 to f32
    %p = arith.mulf %ea, %eb : f32
    %s = arith.addf %c, %p : f32
    linalg.yield %s : f32
  } -> tensor<4x16xf32>
  %dot = linalg.dot ins(%v, %u : tensor<8xf32>, tensor<8xf32>) outs(%d : tensor<f32>) -> tensor<f32>
  return %r, %dot : tensor<4x16xf32>, tensor<f32>
}
"""
    _, report = linfuse.optimize(ir, return_report=True)
    (done,) = report.of_kind("specialize")
    assert done.details == {"op": "linalg.generic", "named": "linalg.matmul",
                            "what": "f16 x f16 -> f32, transposed B"}
    (left,) = report.of_kind("not-specialized")
    assert left.line == 14
    assert left.details["why"] == "a dot product (no M or N dimension)"
    assert report.statistics["linfuse-specialize-contractions"] == {
        "contractions-specialized": 1}
