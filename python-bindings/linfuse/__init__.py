"""linfuse: merge parallel and chained matmuls, lower them to BLAS GEMMs.

Work on MLIR text (linalg on tensors, as torch-mlir or IREE import it):

    >>> import linfuse
    >>> optimized, report = linfuse.optimize(ir, return_report=True)
    >>> [str(r) for r in report.merges]
    ['model.py:12:0: merged 3 matmuls sharing %arg0 into one ?x2304 GEMM']
    >>> llvm_ir = linfuse.lower(optimized, target="cpu")

or compile and call it on numpy arrays (torch tensors through DLPack, read
in place on the CPU):

    >>> module = linfuse.compile(ir, target="cpu")
    >>> q, k, v = module.main(x, wq, wk, wv)
    >>> module.main.load_weights(wq, wk, wv)   # pack once ...
    >>> q, k, v = module.main(x)               # ... then pass activations only

From PyTorch, see `linfuse.torch.compile`. Every failure raises
`linfuse.Error` carrying the one-line diagnostic ("<input>:3:9: ...").
"""

from __future__ import annotations

import os
import sys
from typing import Any, Sequence


def _find_libraries() -> None:
    """f16 GEMMs run on oneDNN 3 (PyPI's onednn-cpu-gomp puts libdnnl.so.3
    in the environment's lib/), large f32 and bf16 weights on Intel CPUs on
    oneMKL (PyPI's mkl: libmkl_rt.so.3); the runtime looks where this
    says."""
    for variable, name in (("LINFUSE_DNNL3_LIBRARY", "libdnnl.so.3"),
                           ("LINFUSE_MKL_LIBRARY", "libmkl_rt.so.3")):
        lib = os.path.join(sys.prefix, "lib", name)
        if variable not in os.environ and os.path.exists(lib):
            os.environ[variable] = lib


_find_libraries()

from . import _linfuse  # noqa: E402
from ._report import Remark, Report

__all__ = ["Error", "Remark", "Report", "Module", "Function", "optimize", "lower",
           "run_pipeline", "compile", "runtime_stats", "cuda_enabled",
           "set_num_threads", "get_num_threads", "set_weight_reorder",
           "get_weight_reorder", "set_mkl", "get_mkl", "mkl_available"]

#: Raised for unparsable IR, failing passes, bad inputs and runtime errors.
Error = _linfuse.Error


def runtime_stats(reset: bool = False) -> dict[str, int]:
    """The runtime's counters since the last reset, process-wide:
    {"gemm_calls": ..., "kernel_launches": ...} (BLAS calls on the host,
    kernel launches on the GPU; "weight_reorders": weights copied into
    oneDNN's layout or packed for oneMKL; "mkl_gemm_calls": host GEMMs
    oneMKL computed; "few_row_gemm_calls": f16 host GEMMs of 1-4 rows
    linfuse's own kernels computed)."""
    return _linfuse.runtime_stats(reset)


def set_num_threads(n: int) -> int:
    """Threads of the host GEMMs, process-wide: n > 0 sets the count, n <= 0
    restores the default ($LINFUSE_NUM_THREADS, else OpenMP's:
    OMP_NUM_THREADS or every core). Returns the count in effect. GEMMs under
    64 KFLOP run on the calling thread alone. `linfuse.torch` follows
    `torch.get_num_threads()` unless $LINFUSE_NUM_THREADS is set."""
    return _linfuse.set_num_threads(int(n))


def get_num_threads() -> int:
    """The host GEMMs' thread count (see `set_num_threads`)."""
    return _linfuse.get_num_threads()


_REORDER_MODES = ("never", "above-one-row", "always")


def set_weight_reorder(mode: str) -> str:
    """Which host GEMMs read a weight from oneDNN's reordered copy of it
    (made once per weight, a second copy in memory), process-wide:
    "above-one-row" (the default: one-row products, decode, read the plain
    layout fastest), "always" (every product, so that the plain values may
    be given up: `linfuse.torch.compile(..., release_weights=True)`) or
    "never" (one copy, slower for several rows). The default comes from
    $LINFUSE_REORDER_WEIGHTS (0: never, all: always). Returns the previous
    mode."""
    if mode not in _REORDER_MODES:
        raise ValueError(f"set_weight_reorder: mode must be one of "
                         f"{', '.join(_REORDER_MODES)}; got {mode!r}")
    return _REORDER_MODES[_linfuse.set_weight_reorder(_REORDER_MODES.index(mode))]


def get_weight_reorder() -> str:
    """The mode `set_weight_reorder` set."""
    return _REORDER_MODES[_linfuse.get_weight_reorder()]


_MKL_MODES = ("never", "auto", "always")


def set_mkl(mode: str) -> str:
    """Whether host GEMMs on large weights (f32 or bf16, 2^22 elements and
    1024 columns or more, with more than one row of output) run on oneMKL's
    packed GEMMs instead of oneDNN, process-wide: "auto" (the default: on
    Intel CPUs, where it was measured faster), "always" (any CPU) or
    "never". Where oneMKL cannot be loaded everything runs on oneDNN. The
    default comes from $LINFUSE_MKL (0: never, 1: always). Returns the
    previous mode."""
    if mode not in _MKL_MODES:
        raise ValueError(f"set_mkl: mode must be one of "
                         f"{', '.join(_MKL_MODES)}; got {mode!r}")
    return _MKL_MODES[_linfuse.set_mkl(_MKL_MODES.index(mode))]


def get_mkl() -> str:
    """The mode `set_mkl` set."""
    return _MKL_MODES[_linfuse.get_mkl()]


def mkl_available() -> bool:
    """Whether oneMKL can be loaded (PyPI's mkl in this environment, or
    $LINFUSE_MKL_LIBRARY) and run on GNU OpenMP beside oneDNN."""
    return _linfuse.mkl_available()


def cuda_enabled() -> bool:
    """True when linfuse was built with the CUDA backend (target="cuda"
    compiles; running it needs a GPU)."""
    return _linfuse.cuda_enabled()


def _options(pass_options: dict[str, Any]) -> str:
    """{"lift_weights": True} -> "lift-weights=true"."""
    parts = []
    for key, value in pass_options.items():
        if isinstance(value, bool):
            value = "true" if value else "false"
        parts.append(f"{key.replace('_', '-')}={value}")
    return " ".join(parts)


def _result(pair, return_report: bool):
    text, native = pair
    return (text, Report._from_native(native)) if return_report else text


def optimize(ir: str, *, return_report: bool = False, **pass_options):
    """Runs `--linfuse-optimize` on `ir` (MLIR text) and returns the new text.

    Options are the pipeline's (`lift_weights=True` moves weight packing
    into `@f__pack`). With `return_report=True`, returns `(ir, Report)`.
    """
    return _result(_linfuse.optimize(ir, _options(pass_options)), return_report)


def lower(ir: str, target: str = "cpu", *, return_report: bool = False):
    """Runs `--linfuse-lower-to-cpu` (or `-cuda`): LLVM-dialect text."""
    return _result(_linfuse.lower(ir, target), return_report)


def run_pipeline(ir: str, pipeline: str, *, return_report: bool = False):
    """Runs any textual pass pipeline, as `mlir-opt --pass-pipeline` takes it:
    `"builtin.module(linfuse-merge-parallel-matmuls, canonicalize)"`."""
    return _result(_linfuse.run_pipeline(ir, pipeline), return_report)


class Function:
    """One compiled public function of a `Module`.

    Call it with one array per argument (numpy arrays, or objects with
    `__dlpack__` in host memory, or anything `numpy.asarray` takes). It
    returns a numpy array, or a tuple for several results; bf16 results are
    numpy uint16 arrays of bf16 bits (and bf16 inputs may be passed so).

    Arguments marked `linfuse.weight` are packed (concatenated, folded) by a
    one-time packing function: `load_weights(*weights)` runs it once and
    keeps the weights; later calls take the other arguments only. Calling
    with every argument packs on each call.
    """

    def __init__(self, native: "_linfuse.CompiledFunction", optimized: bool = True):
        self._native = native
        self._optimized = optimized
        self.report = Report._from_native(native.report)
        #: The function whose compiled code this one runs (`instance()`),
        #: or None.
        self.instance_of: Function | None = None

    @property
    def name(self) -> str:
        return self._native.name

    @property
    def arguments(self) -> list[str]:
        """Argument types as written, weights marked: ["?x64xf32", "64x64xf32 (weight)"]."""
        return [t + (" (weight)" if w else "") for t, w in self._native.arguments]

    @property
    def results(self) -> list[str]:
        return [t for t, _ in self._native.results]

    @property
    def num_weights(self) -> int:
        return sum(1 for _, w in self._native.arguments if w)

    @property
    def concatenated_weights(self) -> list[list[int]]:
        """Groups of weights (indices among the weight arguments) that
        packing concatenates row by row into one merged weight (gate and up;
        Q, K and V). On the CPU, weights of a group that lie one after the
        other in memory (contiguous, each starting where the previous one
        ends) become the merged weight as they are, without a copy."""
        return [list(g) for g in self._native.concatenated_weights]

    def hand_over_weights(self, within: list[tuple[int, int]]) -> list[tuple[int, int]]:
        """After `load_weights`, before the first call, with
        `set_weight_reorder("always")`: hands the packed weights that this
        function reads only as GEMM weights, and that lie in the weights
        passed (not copies packing made) within one of the `within`
        (address, bytes) ranges, over to the runtime: oneDNN's reordered
        copy of each is written over its bytes where its layout takes exactly
        those, else made elsewhere and the plain values' pages leave memory
        (reading as zeros); either way the copy is the only one. The caller
        must keep those addresses reserved (mapped, not reused) while the
        function lives, and must neither read nor write the values again. Returns every (address, bytes) range handed
        over. CPU only ([] elsewhere)."""
        return [tuple(r) for r in self._native.hand_over_weights(list(within))]

    def instance(self) -> "Function":
        """A function running the same compiled code, with weights of its
        own (`load_weights`), without compiling again: one compile serves
        functions that differ only in their weights, such as a model's
        identical layers. The report is this function's. CPU only."""
        copy = Function(self._native.instantiate(), self._optimized)
        copy.instance_of = self
        return copy

    def load_weights(self, *weights) -> None:
        """Packs the `linfuse.weight` arguments, in order, once. The arrays
        are kept (and read in place on the CPU): do not modify them. On
        failure the previous weights stay loaded. Not to be called while
        another thread calls the function."""
        self._native.pack_weights(list(weights))

    def __call__(self, *args):
        results = self._native(list(args))
        return results[0] if len(results) == 1 else tuple(results)

    def __repr__(self) -> str:
        return (f"<linfuse.Function @{self.name}({', '.join(self.arguments)}) -> "
                f"({', '.join(self.results)}) on {self._native.target}>")


class Module:
    """Compiled public functions of an MLIR module, by name."""

    def __init__(self, functions: dict[str, Function], target: str):
        self.functions = functions
        self.target = target
        self.report = Report()
        for fn in functions.values():
            self.report._merge(fn.report)

    def __getattr__(self, name: str) -> Function:
        functions = self.__dict__.get("functions", {})
        if name in functions:
            return functions[name]
        raise AttributeError(f"no public function @{name} in the module "
                             f"(have: {', '.join(functions) or 'none'})")

    def __getitem__(self, name: str) -> Function:
        return self.functions[name]

    def __call__(self, *args):
        """Calls the module's only function."""
        if len(self.functions) != 1:
            raise Error(f"the module has {len(self.functions)} public functions; "
                        "call one by name")
        return next(iter(self.functions.values()))(*args)

    def __repr__(self) -> str:
        return f"<linfuse.Module {list(self.functions)} on {self.target}>"


def compile(ir: str, target: str = "cpu", *, optimize: bool = True,
            entry: str | Sequence[str] | None = None,
            cuda_graph: bool = False, runtime_checks: bool = True,
            object_cache: str | os.PathLike | None = None) -> Module:
    """Optimizes, lowers and JIT-compiles the public functions of `ir`
    (or only `entry`) for `target` ("cpu", or "cuda" in builds with CUDA).

    `optimize=False` skips `--linfuse-optimize` (the unfused reference).
    `cuda_graph=True` (target "cuda" only) captures each function's device
    work into a CUDA graph on its first call with given device buffers and
    replays it on later ones (`linfuse-compile --cuda-graph`).
    `runtime_checks=False` drops the run-time checks that operand sizes agree
    and indices are in bounds (on by default: a call whose sizes do not fit
    the program raises `linfuse.Error` naming the op's location instead of
    reading past a buffer).

    `object_cache`: a directory where the CPU code LLVM generates is kept,
    so that compiling the same function again for this machine (the same
    script run again) links it instead of running LLVM's optimizer and code
    generator (most of a small function's compile time). None (the default)
    means `$LINFUSE_CACHE_DIR`, else `$XDG_CACHE_HOME/linfuse`, else
    `~/.cache/linfuse`, or no cache when `LINFUSE_JIT_CACHE=0`; "" means
    none. Objects are named by a hash of the lowered code, the CPU and the
    compiler; with them, what linfuse's passes found (the report, the
    packing function) is kept under a hash of the function as given, so a
    second compilation runs neither the passes nor LLVM. A damaged or
    unwritable cache only means compiling again.
    """
    if entry is None:
        names = _linfuse.public_functions(ir)
    else:
        names = [entry] if isinstance(entry, str) else list(entry)
    if not names:
        raise Error("the module has no public function with a body")
    functions = {name: Function(_linfuse.CompiledFunction(ir, name, target, optimize,
                                                          cuda_graph, runtime_checks,
                                                          None if object_cache is None
                                                          else os.fspath(object_cache)),
                                optimize)
                 for name in names}
    return Module(functions, target)
