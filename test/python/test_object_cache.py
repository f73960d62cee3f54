"""JIT-compiled objects kept on disk (`object_cache`, ~/.cache/linfuse by
default): a second compilation of the same function links the stored
object instead of running LLVM (and, keyed on the module as given, skips
linfuse's passes too, restoring what they reported), with the same results;
the weights it reads are the new compilation's; a damaged, foreign or
unwritable cache only means compiling again (issue 19: compile time)."""

import os
import pathlib
import subprocess
import sys
import threading

import numpy as np
import pytest
import torch

import linfuse
import linfuse.torch as lt

# Two matmuls sharing x with weight arguments: a packing function (the
# weights concatenated) and the merged GEMM, both looked up in the object.
SHARED = """
func.func @main(%x: tensor<?x32xf32>, %wa: tensor<32x16xf32> {linfuse.weight},
                %wb: tensor<32x8xf32> {linfuse.weight}) -> (tensor<?x16xf32>, tensor<?x8xf32>) {
  %c0 = arith.constant 0 : index
  %cst = arith.constant 0.0 : f32
  %m = tensor.dim %x, %c0 : tensor<?x32xf32>
  %ea = tensor.empty(%m) : tensor<?x16xf32>
  %za = linalg.fill ins(%cst : f32) outs(%ea : tensor<?x16xf32>) -> tensor<?x16xf32>
  %a = linalg.matmul ins(%x, %wa : tensor<?x32xf32>, tensor<32x16xf32>) outs(%za : tensor<?x16xf32>) -> tensor<?x16xf32>
  %eb = tensor.empty(%m) : tensor<?x8xf32>
  %zb = linalg.fill ins(%cst : f32) outs(%eb : tensor<?x8xf32>) -> tensor<?x8xf32>
  %b = linalg.matmul ins(%x, %wb : tensor<?x32xf32>, tensor<32x8xf32>) outs(%zb : tensor<?x8xf32>) -> tensor<?x8xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                      iterator_types = ["parallel", "parallel"]}
      ins(%b : tensor<?x8xf32>) outs(%eb : tensor<?x8xf32>) {
    ^bb0(%v: f32, %o: f32):
      %t = math.tanh %v : f32
      linalg.yield %t : f32
  } -> tensor<?x8xf32>
  return %a, %r : tensor<?x16xf32>, tensor<?x8xf32>
}
"""


def from_cache(fn: linfuse.Function) -> bool:
    return fn.report.statistics.get("linfuse-jit", {}).get("objects-from-cache") == 1


def entries(cache: pathlib.Path, kind: str = "o") -> list[pathlib.Path]:
    """The objects (`kind` "o") or the compiled functions ("fn") stored."""
    return sorted(cache.glob(f"*.{kind}")) if cache.is_dir() else []


def remarks(fn: linfuse.Function) -> list[str]:
    return [str(r) for r in fn.report.remarks]


def check_shared(fn: linfuse.Function, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((5, 32), dtype=np.float32)
    wa = rng.standard_normal((32, 16), dtype=np.float32)
    wb = rng.standard_normal((32, 8), dtype=np.float32)
    a, b = fn(x, wa, wb)
    np.testing.assert_allclose(a, x @ wa, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(b, np.tanh(x @ wb), rtol=1e-5, atol=1e-5)
    fn.load_weights(wa, wb)
    a1, b1 = fn(x[:1])
    np.testing.assert_allclose(a1, (x @ wa)[:1], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(b1, np.tanh(x @ wb)[:1], rtol=1e-5, atol=1e-5)


def test_second_compilation_links_the_stored_object(tmp_path):
    cache = tmp_path / "jit"
    first = linfuse.compile(SHARED, object_cache=str(cache))["main"]
    assert not from_cache(first)
    assert len(entries(cache)) == 1 and len(entries(cache, "fn")) == 1
    # No temporary file is left behind.
    assert sorted(cache.iterdir()) == sorted(entries(cache) + entries(cache, "fn"))
    second = linfuse.compile(SHARED, object_cache=str(cache))["main"]
    assert from_cache(second)
    assert len(entries(cache)) == 1 and len(entries(cache, "fn")) == 1
    check_shared(first)
    check_shared(second, seed=1)
    # What the passes found is reported and kept either way: the merge's
    # remarks (with their locations) and counters, the packed weights.
    assert second.report.statistics["linfuse-merge-parallel-matmuls"] == \
        first.report.statistics["linfuse-merge-parallel-matmuls"]
    assert remarks(second) == remarks(first) and any("merged" in r for r in remarks(first))
    stats = {k: v for k, v in second.report.statistics.items() if k != "linfuse-jit"}
    assert stats == {k: v for k, v in first.report.statistics.items() if k != "linfuse-jit"}
    assert second.concatenated_weights == first.concatenated_weights
    assert second.arguments == first.arguments and second.results == first.results
    # Other options and another module are other entries: the reference
    # (unmerged), no run-time checks, another entry's name.
    for options in ({"optimize": False}, {"runtime_checks": False}):
        other = linfuse.compile(SHARED, object_cache=str(cache), **options)["main"]
        assert not from_cache(other)
        check_shared(other)
    assert len(entries(cache, "fn")) == 3


def test_another_process_links_the_stored_object(tmp_path):
    cache = tmp_path / "jit"
    script = (
        "import sys, linfuse\n"
        "fn = linfuse.compile(open(sys.argv[1]).read())['main']\n"
        "print(fn.report.statistics.get('linfuse-jit', {}).get('objects-from-cache', 0))\n")
    ir = tmp_path / "shared.mlir"
    ir.write_text(SHARED)
    env = dict(os.environ, LINFUSE_CACHE_DIR=str(cache))
    env.pop("LINFUSE_JIT_CACHE")          # the default: on
    runs = [subprocess.run([sys.executable, "-c", script, str(ir)], env=env,
                           capture_output=True, text=True, check=True).stdout.strip()
            for _ in range(2)]
    assert runs == ["0", "1"]
    assert len(entries(cache)) == 1
    env["LINFUSE_JIT_CACHE"] = "0"
    off = subprocess.run([sys.executable, "-c", script, str(ir)], env=env,
                         capture_output=True, text=True, check=True).stdout.strip()
    assert off == "0"


def test_linked_code_reads_the_new_compilations_constants(tmp_path):
    # weights="constants": weights of 64 KiB and more are bound by address,
    # not compiled in, so two models of the same shapes lower to the same
    # module and share one object; each must read its own weights.
    cache = str(tmp_path / "jit")
    x = torch.randn(3, 256)
    results = []
    for seed in (0, 1):
        torch.manual_seed(seed)
        # (No biases: constants below 64 KiB are compiled in, so models
        # differing there are different modules.)
        model = torch.nn.Sequential(torch.nn.Linear(256, 128, bias=False), torch.nn.GELU(),
                                    torch.nn.Linear(128, 128, bias=False)).eval()
        ep, imported = lt.export_and_import(model, (x,), weights="constants")
        fn = linfuse.compile(imported.ir, entry=imported.func_name,
                             object_cache=cache)[imported.func_name]
        assert fn.report.statistics["linfuse-jit"]["constants-bound-as-data"] >= 1
        assert from_cache(fn) == (seed == 1)
        # Constants bound by address come from the passes: only the object
        # is stored, never the function.
        assert entries(tmp_path / "jit", "fn") == []
        with torch.no_grad():
            expected = model(x).numpy()
        out = fn(x.numpy())
        np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-4)
        results.append(out)
    assert not np.allclose(results[0], results[1])


@pytest.mark.parametrize("damage", ["garbage", "truncated", "flipped", "empty"])
def test_a_damaged_entry_is_compiled_again(tmp_path, damage):
    cache = tmp_path / "jit"
    linfuse.compile(SHARED, object_cache=str(cache))
    (entry,) = entries(cache)
    data = entry.read_bytes()
    if damage == "garbage":
        entry.write_bytes(b"\x7fELF" + os.urandom(len(data)))
    elif damage == "truncated":
        entry.write_bytes(data[:len(data) // 2])
    elif damage == "flipped":
        # One bit of the object itself: its hash no longer matches.
        flipped = bytearray(data)
        flipped[len(data) // 2] ^= 0x10
        entry.write_bytes(bytes(flipped))
    else:
        entry.write_bytes(b"")
    again = linfuse.compile(SHARED, object_cache=str(cache))["main"]
    assert not from_cache(again)
    check_shared(again)
    # Stored again, whole: the next compilation links it.
    assert entries(cache)[0].read_bytes() == data
    assert from_cache(linfuse.compile(SHARED, object_cache=str(cache))["main"])


@pytest.mark.parametrize("damage", ["garbage", "flipped"])
def test_a_damaged_function_entry_is_compiled_again(tmp_path, damage):
    # The function's entry (what the passes found) damaged: the passes run
    # again, the object is still linked from the cache, the entry rewritten.
    cache = tmp_path / "jit"
    first = linfuse.compile(SHARED, object_cache=str(cache))["main"]
    (entry,) = entries(cache, "fn")
    data = entry.read_bytes()
    if damage == "garbage":
        entry.write_bytes(os.urandom(len(data)))
    else:
        flipped = bytearray(data)
        flipped[-3] ^= 0x01
        entry.write_bytes(bytes(flipped))
    again = linfuse.compile(SHARED, object_cache=str(cache))["main"]
    assert from_cache(again)          # the object, linked
    assert remarks(again) == remarks(first)
    check_shared(again)
    assert entry.read_bytes() == data


def test_no_cache_when_it_cannot_be_written_or_is_off(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    for cache in (str(blocker / "jit"), str(blocker), ""):
        fn = linfuse.compile(SHARED, object_cache=cache)["main"]
        assert not from_cache(fn)
        check_shared(fn)
    assert blocker.read_text() == "not a directory"
    assert not (blocker.parent / "jit").exists()


def test_threads_compiling_one_module_at_once(tmp_path):
    # The partitions of a model compile on threads; several may store and
    # link the same entry at once.
    cache = str(tmp_path / "jit")
    fns, errors = [None] * 6, []

    def work(i):
        try:
            fns[i] = linfuse.compile(SHARED, object_cache=cache)["main"]
        except Exception as e:           # noqa: BLE001 (reported below)
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(fns))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for i, fn in enumerate(fns):
        check_shared(fn, seed=i)
    stored = entries(pathlib.Path(cache)) + entries(pathlib.Path(cache), "fn")
    assert len(stored) == 2
    assert sorted(pathlib.Path(cache).iterdir()) == sorted(stored)


def test_a_model_compiled_again_links_every_partition(tmp_path, monkeypatch):
    # linfuse.torch.compile of a model with operators left to PyTorch (a
    # partitioned model): the second compilation links each partition.
    monkeypatch.setenv("LINFUSE_CACHE_DIR", str(tmp_path / "jit"))
    monkeypatch.delenv("LINFUSE_JIT_CACHE")
    transformers = pytest.importorskip("transformers")
    config = transformers.LlamaConfig(vocab_size=128, hidden_size=64, intermediate_size=128,
                                      num_hidden_layers=2, num_attention_heads=4,
                                      num_key_value_heads=2)
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(config).eval()
    ids = torch.randint(0, 128, (1, 7))
    kwargs = {"input_ids": ids, "use_cache": False}
    compiled = [lt.compile(model, (), kwargs) for _ in range(2)]
    with torch.no_grad():
        expected = model(**kwargs).logits
    for c in compiled:
        torch.testing.assert_close(c(**kwargs).logits, expected, rtol=1e-4, atol=1e-4)
    stored = entries(tmp_path / "jit")
    assert len(stored) >= 2
    assert len(compiled[1].partitions) >= 2
    for first, second in zip(compiled[0].partitions, compiled[1].partitions):
        assert not from_cache(first.function)
        assert from_cache(second.function)


def test_the_least_recently_used_entries_go_beyond_4096(tmp_path):
    cache = tmp_path / "jit"
    linfuse.compile(SHARED, object_cache=str(cache))
    (used,) = entries(cache)
    cache.mkdir(exist_ok=True)
    for i in range(4100):
        stale = cache / f"{i:064x}.o"
        stale.write_bytes(b"")
        os.utime(stale, (1_000_000 + i, 1_000_000 + i))
    (function,) = entries(cache, "fn")
    for old in (used, function):            # older than all, but used now:
        os.utime(old, (900_000, 900_000))
    assert from_cache(linfuse.compile(SHARED, object_cache=str(cache))["main"])
    # A store (another function: its object, then its entry) evicts down to
    # three quarters of 4096, oldest first; the second store is then below.
    linfuse.compile(SHARED, optimize=False, object_cache=str(cache))
    left = entries(cache) + entries(cache, "fn")
    assert len(left) == 3072 + 1
    assert used in left and function in left
    assert (cache / f"{4099:064x}.o") in left
    assert (cache / f"{0:064x}.o") not in left


class SharedInput(torch.nn.Module):
    """Two projections of x: merged, their weights concatenated at compile
    time into a 22 KiB constant (below the 64 KiB bound as data)."""

    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(64, 48, bias=False)
        self.b = torch.nn.Linear(64, 40, bias=False)

    def forward(self, x):
        return self.a(x), torch.tanh(self.b(x))


def test_weights_folded_at_compile_time_do_not_change_the_key(tmp_path):
    # The folded constant is a dense_resource named from a process-wide
    # counter (linfuse_weight_N): the same model must still hit.
    cache = str(tmp_path / "jit")
    x = torch.randn(3, 64)
    hits = []
    for _ in range(3):
        torch.manual_seed(0)
        model = SharedInput().eval()
        ep, imported = lt.export_and_import(model, (x,), weights="constants")
        fn = linfuse.compile(imported.ir, entry=imported.func_name,
                             object_cache=cache)[imported.func_name]
        assert fn.report.statistics["linfuse-merge-parallel-matmuls"]["matmuls-removed"] == 1
        hits.append(from_cache(fn))
        with torch.no_grad():
            expected = model(x)
        for got, want in zip(fn(x.numpy()), expected):
            np.testing.assert_allclose(got, want.numpy(), rtol=1e-4, atol=1e-4)
    assert hits == [False, True, True]
    assert len(entries(tmp_path / "jit")) == 1


def test_an_entry_that_does_not_link_is_compiled_over_silently(tmp_path, capfd):
    # A whole, hash-checked entry holding another function's object (no
    # @main in it): the link fails, nothing is printed, the function is
    # compiled and its own object replaces the entry.
    cache = tmp_path / "jit"
    linfuse.compile(SHARED, object_cache=str(cache))
    (mine,) = entries(cache)
    good = mine.read_bytes()
    linfuse.compile(SHARED.replace("@main", "@other"), object_cache=str(cache))
    (other,) = [p for p in entries(cache) if p != mine]
    mine.write_bytes(other.read_bytes())
    capfd.readouterr()
    fn = linfuse.compile(SHARED, object_cache=str(cache))["main"]
    assert not from_cache(fn)
    check_shared(fn)
    assert capfd.readouterr().err == ""
    assert mine.read_bytes() == good


def test_the_directory_it_makes_is_the_users_alone(tmp_path):
    cache = tmp_path / "new" / "jit"
    linfuse.compile(SHARED, object_cache=cache)          # a PathLike too
    assert (cache.stat().st_mode & 0o777) == 0o700
    assert len(entries(cache)) == 1
