//===- Passes.td - linfuse conversion passes ---------------*- tablegen -*-===//

#ifndef LINFUSE_CONVERSION_PASSES_TD
#define LINFUSE_CONVERSION_PASSES_TD

include "mlir/Pass/PassBase.td"

def ConvertGemmToRuntimePass : Pass<"linfuse-convert-gemm-to-runtime",
                                    "::mlir::ModuleOp"> {
  let summary = "Lower memref linfuse.gemm to calls into liblinfuse_runtime";
  let description = [{
    Each `linfuse.gemm` on memrefs becomes a call to
    `linfuse_<target>_gemm_<ab>_<c>` (for example `linfuse_cpu_gemm_f16_f32`:
    A and B are f16, C and bias f32), declared in the module if absent, with
    the C ABI of `include/linfuse/Runtime/Runtime.h`: every operand is cast
    to an unranked memref (`memref<*xT>`, which the LLVM lowering passes as
    rank + descriptor pointer, so strided views such as column slices of a
    merged result go in place), then the flags (transposes, bias), the
    epilogue code, alpha and beta. Without a bias, C is passed in its place
    (not read). The call returns a status, which the runtime also records
    for the driver (`linfuse_last_error`).

    ```mlir
    linfuse.gemm ins(%a, %b : memref<?x32xf32>, memref<64x32xf32>)
        bias(%bias : memref<64xf32>) outs(%c : memref<?x64xf32, strided<[192, 1], offset: ?>>)
        transpose_b epilogue = <relu>
    // becomes
    %0 = memref.cast %a : memref<?x32xf32> to memref<*xf32>
    ...
    %s = func.call @linfuse_cpu_gemm_f32_f32(%0, %1, %2, %3, %flags, %epi, %alpha, %beta)
        : (memref<*xf32>, memref<*xf32>, memref<*xf32>, memref<*xf32>, i32, i32, f32, f32) -> i32
    ```

    A `linfuse.gemm` still on tensors is an error (bufferize first).
  }];
  let dependentDialects = ["::mlir::func::FuncDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::arith::ArithDialect"];
  let options = [
    Option<"target", "target", "std::string", /*default=*/"\"cpu\"",
           "Runtime backend: cpu (CBLAS) or cuda (cuBLASLt)">,
    Option<"releaseOnPack", "release-on-pack", "bool", /*default=*/"true",
           "CPU: start each weight-packing function with "
           "linfuse_cpu_release_packed_weights() (every reordered copy "
           "dropped); off where the driver drops the copies of the ranges "
           "it packs itself (the JIT)">,
  ];
}

def AttachCInterfacePass : Pass<"linfuse-attach-c-interface",
                                "::mlir::ModuleOp"> {
  let summary = "Give every public function a C interface "
                "(`_mlir_ciface_<name>`)";
  let description = [{
    Sets `llvm.emit_c_interface` on every public `func.func` with a body, so
    `--convert-func-to-llvm` emits `_mlir_ciface_<name>`, taking memref
    descriptors by pointer: the entry points of `linfuse-compile`'s shared
    libraries and of the JIT.
  }];
}

def ConcatInPlacePass : Pass<"linfuse-concat-in-place"> {
  let summary = "Let the producers of a tensor.concat write into its result";
  let description = [{
    Bufferized as is, `tensor.concat` allocates its result and copies every
    operand in: the merged weights a packing function builds are written
    twice, and each operand's buffer is live next to the result (packing a
    4-layer LLaMA MLP in bf16 held 1.1 GB more than the 0.7 GB it returns).
    This pass writes each concat as `tensor.insert_slice`s of its operands
    into one `tensor.empty` (upstream's decomposition); the lowering
    pipelines then run upstream's `--eliminate-empty-tensors`, so an
    operand computed into a `tensor.empty` (a scaled weight, an
    element-wise result) is computed into its slice of the result instead.
    Operands that are function arguments are still copied once.
  }];
  let dependentDialects = ["::mlir::tensor::TensorDialect"];
}

def DynamicExpandShapePass : Pass<"linfuse-dynamic-expand-shape"> {
  let summary = "Write expand_shapes with several dynamic sizes in one group "
                "as tensor.reshape";
  let description = [{
    A `tensor.expand_shape` whose reassociation group holds two or more
    dynamic sizes (restoring `[batch, seq, N]` from the `[batch*seq, N]` rows
    of a GEMM when both batch and sequence are dynamic, as importers write
    it) crashes MLIR 22's `--expand-strided-metadata` once bufferized
    (llvm/llvm-project#186830, fixed in LLVM 23). Such an op becomes a
    `tensor.reshape` to the same shape, given as a `tensor.from_elements` of
    the sizes, which bufferizes to `memref.reshape` and lowers correctly.
    Expand shapes with at most one dynamic size per group are left alone
    (they stay views).

    ```mlir
    %r = tensor.expand_shape %flat [[0, 1], [2]] output_shape [%b, %s, 64]
        : tensor<?x64xf32> into tensor<?x?x64xf32>
    // becomes
    %c64 = arith.constant 64 : index
    %shape = tensor.from_elements %b, %s, %c64 : tensor<3xindex>
    %r = tensor.reshape %flat(%shape)
        : (tensor<?x64xf32>, tensor<3xindex>) -> tensor<?x?x64xf32>
    ```
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::tensor::TensorDialect"];
}

def ReadOnlyArgumentsPass : Pass<"linfuse-read-only-arguments",
                                 "::mlir::ModuleOp"> {
  let summary = "Never write into the caller's input tensors";
  let description = [{
    One-shot bufferization with `bufferize-function-boundaries` treats
    function arguments as writable, so an element-wise op on an input may
    update the caller's buffer in place. Compiled functions are called
    repeatedly on the same inputs (benchmarks, packed weights reused across
    calls), so this pass marks every tensor argument of every public
    function `bufferization.writable = false` (unless already annotated):
    bufferization then copies before writing. Part of the lowering
    pipelines' calling convention: inputs are read-only.
  }];
}

def RejectUndefinedOpsPass : Pass<"linfuse-reject-undefined-ops"> {
  let summary = "Fail on ops that verify but whose result is undefined";
  let description = [{
    Some ops verify with operands that make them undefined behavior, and
    compiled code then reads or writes anywhere: `tensor.dim` / `memref.dim`
    with a constant index outside `[0, rank)`, and `tensor.extract` /
    `tensor.insert` / `memref.load` / `memref.store` with a constant index
    outside a static dimension. Each is an error at the op's location and
    the pass fails, before anything is lowered (the lowering pipelines run
    it first). Indices known only at run time are the run-time checks'
    (`runtime-checks=true` of the lowering pipelines).
  }];
}

def RuntimeChecksPass : Pass<"linfuse-runtime-checks"> {
  let summary = "Run-time checks of operand sizes and indices, naming the "
                "function arguments involved";
  let description = [{
    Upstream's `generate-runtime-verification` (every op implementing
    `RuntimeVerifiableOpInterface` emits `cf.assert`s before itself:
    linalg ops check their operands' sizes against their loop ranges,
    `tensor.dim`/`extract_slice`/`extract` and the memref ops their
    indices), with messages that say which function argument an operand
    is: "dimension #0 of input/output operand #1 (argument 1 of @main) is
    incompatible with inferred dimension size", and the op's location.
    The lowering pipelines run it on tensors after raising GEMMs
    (`runtime-checks=true`, the default).
  }];
  let dependentDialects = ["::mlir::cf::ControlFlowDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::index::IndexDialect",
                           "::mlir::scf::SCFDialect",
                           "::mlir::tensor::TensorDialect"];
}

def EntryChecksPass : Pass<"linfuse-entry-checks", "::mlir::func::FuncOp"> {
  let summary = "Check at function entry the size relations the program "
                "implies, before optimizations remove them";
  let description = [{
    A linalg op relates its operands' sizes: each loop dimension has one
    extent, so every operand dimension indexed by it must have that size.
    The optimizer may rewrite the ops that implied a relation into ones
    that no longer need it (two matmuls of one weight on inputs of
    different row counts become one GEMM over their concatenation, which
    runs), so the run-time checks of the lowering, which see the optimized
    program, would let a call through that the input program forbids.

    This pass, run first by `--linfuse-optimize{entry-checks=true}` (which
    linfuse-run, `linfuse.compile` and linfuse-compile use while run-time
    checks are on), states those relations as `cf.assert`s at the start of
    the function: for every linalg op in the function's entry block, every
    pair of operand dimensions that share a loop dimension and whose sizes
    are not provably equal, both sizes are expressed in the function
    arguments' sizes (ValueBoundsOpInterface) and compared. Sizes that do
    not reduce to argument sizes (data-dependent ones, ops inside loops or
    branches) are left to the lowering's checks. Static shapes add nothing.
  }];
  let dependentDialects = ["::mlir::cf::ControlFlowDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::tensor::TensorDialect"];
}

def DeviceMemoryPass : Pass<"linfuse-device-memory", "::mlir::ModuleOp"> {
  let summary = "Host-side buffers become device buffers (CUDA target)";
  let description = [{
    On the CUDA target every buffer lives in device memory, so nothing goes
    back and forth between ops. In host functions (outside `gpu.module`):

    * `memref.alloc` → `gpu.alloc` (device memory, `mgpuMemAlloc`),
    * `memref.dealloc` → `gpu.dealloc`,
    * `memref.copy` → `linalg.copy`, which becomes a GPU kernel like any
      other element-wise op (it handles strided views, which `gpu.memcpy`
      does not).

    Function arguments and results are device buffers: the caller
    (linfuse-run, a program using linfuse-compile's library) copies host
    data in and out. Run after bufferization and before the linalg → GPU
    kernel lowering.
  }];
  let dependentDialects = ["::mlir::gpu::GPUDialect",
                           "::mlir::linalg::LinalgDialect"];
}

def ThreadParallelLoopsPass : Pass<"linfuse-thread-parallel-loops",
                                   "::mlir::ModuleOp"> {
  let summary = "Run the host's outermost parallel loops on the runtime's "
                "thread pool";
  let description = [{
    Each outermost `scf.parallel` of a host function (what
    `--convert-linalg-to-parallel-loops` makes of element-wise ops, norms
    and copies) becomes a call of the runtime's `linfuse_parallel_for`,
    which runs it on the GEMMs' OpenMP pool when it is big enough (and on
    the calling thread otherwise). `memref.copy` ops (the copies of a
    packing function's concatenated weights, results copied out) become
    such loops first.


    1. its dimensions are collapsed into one range of iterations (all but
       the innermost when the body is straight-line code, so that the
       innermost loop stays whole for the vectorizer; all of them when the
       body has a loop of its own, such as a norm's reduction);
    2. the body becomes a private function
       `@<fn>__parallel<N>(%lo: index, %hi: index, %context: !llvm.ptr)`
       that runs iterations `[lo, hi)`;
    3. the values the body reads from outside are stored in a stack struct
       (memrefs as their LLVM descriptors) that `%context` points to;
       constants are cloned into the body instead;
    4. the loop is replaced by
       `linfuse_parallel_for(@fn, %context, iterations, work)`, where
       `work` estimates the elements one iteration touches (the other
       dimensions' and inner loops' trip counts).

    ```mlir
    scf.parallel (%i, %j) = (%c0, %c0) to (%m, %n) step (%c1, %c1) {
      %x = memref.load %a[%i, %j] : memref<?x?xf32>
      ...
    }
    // becomes
    %fn = func.constant @f__parallel0 : (index, index, !llvm.ptr) -> ()
    ... llvm.alloca, llvm.store of %a's descriptor ...
    call @linfuse_parallel_for(%fnptr, %ctx, %m_i64, %n_i64)
    ```

    Loops are left as they are when their body could call into the
    runtime's per-thread error state (`cf.assert`, calls), allocates, has
    results (reductions across iterations), or reads values that have no
    plain LLVM form (vectors, unranked memrefs): they run on the calling
    thread. Host lowering only.
  }];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::func::FuncDialect",
                           "::mlir::scf::SCFDialect"];
}

def TileParallelLoopsPass : Pass<"linfuse-tile-parallel-loops"> {
  let summary = "Tile scf.parallel nests into blocks of threads for the GPU";
  let description = [{
    Tiles each outermost `scf.parallel` so that the innermost dimension is
    split into tiles of `block-size` iterations and every other dimension
    into tiles of 1, with constant inner bounds (an `scf.if` guards the
    remainder): after `--gpu-map-parallel-loops` the outer loop becomes the
    grid and the inner loop a block of `block-size` threads, never one
    thread per block, and consecutive threads touch consecutive elements of
    the innermost (contiguous) dimension.
  }];
  let dependentDialects = ["::mlir::scf::SCFDialect",
                           "::mlir::affine::AffineDialect",
                           "::mlir::arith::ArithDialect"];
  let options = [
    Option<"blockSize", "block-size", "int64_t", /*default=*/"128",
           "Threads per block along the innermost dimension">,
  ];
}

def CudaGraphPass : Pass<"linfuse-cuda-graph", "::mlir::ModuleOp"> {
  let summary = "Capture each public function's device work into a CUDA "
                "graph on its first call, replay it on later calls";
  let description = [{
    Kernel launch overhead dominates small GEMMs: a Q/K/V projection at
    M = 1 is a handful of microseconds of GPU work behind several launches
    and synchronizations. This pass brackets the body of every public
    function (not the weight-packing `@f__pack` functions, which run once)
    with the runtime's function-graph calls (Runtime.h):

    * at entry, the arguments are written into a key (each memref's aligned
      address, offset, sizes and strides; each scalar's bits, as i64) and
      `linfuse_cuda_function_begin(slot, key, length)` is called, `slot`
      being the address of a private, zero-initialized global of the module
      (one per function; the runtime writes a generation number into it);
    * before each `func.return`, `linfuse_cuda_function_end(slot)`.

    The first call with a key captures the body's GEMMs, kernels, copies and
    allocations into a graph; later calls with the same key run only the
    host code (shapes, descriptors) and launch the graph once. Results then
    live in the graph's memory until the function's next call with the same
    key. Run on the CUDA lowering's host IR after `--gpu-async-region`
    (`--linfuse-lower-to-cuda=cuda-graph=true`); an argument that is neither
    a strided memref nor an integer, index or float scalar of at most 64
    bits is an error.

    ```mlir
    func.func @main(%x: memref<?x64xf32>, %w: memref<128x64xf32>) -> memref<?x128xf32> {
      ...
      return %y : memref<?x128xf32>
    }
    // becomes
    memref.global "private" @__linfuse_graph_slot_main : memref<1xi64> = dense<0>
    func.func @main(%x: memref<?x64xf32>, %w: memref<128x64xf32>) -> memref<?x128xf32> {
      %slot = memref.get_global @__linfuse_graph_slot_main : memref<1xi64>
      %key = memref.alloca() : memref<12xi64>
      // ... memref.store of %x's and %w's address, offset, sizes, strides
      %0 = call @linfuse_cuda_function_begin(%slot_addr, %key_addr, %c12) : (index, index, index) -> i32
      ...
      %1 = call @linfuse_cuda_function_end(%slot_addr) : (index) -> i32
      return %y : memref<?x128xf32>
    }
    ```
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::func::FuncDialect",
                           "::mlir::memref::MemRefDialect"];
}

def StreamOrderedGemmsPass : Pass<"linfuse-stream-ordered-gemms",
                                  "::mlir::ModuleOp"> {
  let summary = "Drop the host synchronizations before runtime GEMM calls; "
                "synchronize once before returning";
  let description = [{
    `--gpu-async-region` treats a `linfuse_cuda_gemm_*` call like any host
    code and waits (a host synchronization, `gpu.wait [%t]`) for all device
    work before it. The runtime enqueues the GEMM on the same stream as the
    kernels, copies and stream-ordered allocations, so stream order already
    puts it after them: each such wait only stalls the host until the GPU
    drains, once per GEMM. This pass erases a synchronous `gpu.wait` that
    is followed in its block, past ops without memory effects, by a call of
    a `linfuse_cuda_gemm_*` function, and synchronizes the runtime's stream
    (`linfuse_cuda_synchronize`) before every `func.return` of a function
    that calls one, so a function still returns with its results computed
    (the GEMM may be the last thing it enqueues, after the last wait). A
    synchronous `gpu.wait` right before the return is then redundant and
    erased too. Run on the CUDA lowering's host IR after
    `--gpu-async-region`.
  }];
  let dependentDialects = ["::mlir::func::FuncDialect",
                           "::mlir::gpu::GPUDialect"];
}

def ViewAdjacentWeightsPass : Pass<"linfuse-view-adjacent-weights",
                                   "::mlir::ModuleOp"> {
  let summary = "A packing function's merged weight is a view of its "
                "weights when they lie one after the other in memory";
  let description = [{
    A weight-packing function (`@f__pack`) builds a merged weight as a new
    buffer with each weight copied into its rows: for as long as the packed
    weights live, a second copy of every merged weight beside the caller's.
    A caller that keeps a merge group's weights one after the other in
    memory (linfuse.torch places the parameters of each group in one buffer
    before packing) already holds the concatenation. This pass makes such
    a result check that at run time and return a view of the weights when
    it holds, the copy otherwise.

    A result qualifies when it is a static, identity-layout `memref.alloc`
    in the packing function's entry block whose other uses are subviews of
    whole rows (offsets `[r, 0, ...]`, unit strides), each filled by one
    `memref.copy` from a function argument of the same element type and
    row shape, that cover the rows once and in order, from at least two
    arguments. The view is the first argument reinterpreted with the
    result's shape; it is taken when the first argument's descriptor
    offset is 0 and each next argument starts where the previous one ends
    (byte addresses: aligned pointer plus offset). Such a result has the
    first weight's `allocated` pointer, as for the weights
    `--linfuse-return-views` returns uncopied: it is not the caller's to
    free. Host (CPU) lowering only; runs after bufferization and
    deallocation.

    ```mlir
    %alloc = memref.alloc() : memref<192x64xf32>
    %sv0 = memref.subview %alloc[0, 0] [96, 64] [1, 1] : ...
    memref.copy %arg0, %sv0 : memref<96x64xf32> to ...
    %sv1 = memref.subview %alloc[96, 0] [96, 64] [1, 1] : ...
    memref.copy %arg1, %sv1 : memref<96x64xf32> to ...
    return %alloc : memref<192x64xf32>
    // becomes
    %adjacent = ... // offset(%arg0) == 0 and address(%arg1) == address(%arg0) + 24576
    %r = scf.if %adjacent -> (memref<192x64xf32>) {
      %view = memref.reinterpret_cast %arg0 to offset: [0], sizes: [192, 64], strides: [64, 1] : memref<96x64xf32> to memref<192x64xf32>
      scf.yield %view : memref<192x64xf32>
    } else {
      %alloc = memref.alloc() : memref<192x64xf32>
      ... // the copies, as before
      scf.yield %alloc : memref<192x64xf32>
    }
    return %r : memref<192x64xf32>
    ```
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::scf::SCFDialect"];
}

def ReturnViewsPass : Pass<"linfuse-return-views", "::mlir::ModuleOp"> {
  let summary = "Return slices of a merged GEMM's result as views instead "
                "of copies";
  let description = [{
    Bufferization gives function results an identity layout, so a result
    that is a slice of a larger buffer (q, k and v of a merged Q/K/V GEMM)
    is copied into its own allocation before the return: a second pass over
    the merged output, and on the GPU one copy kernel per result. This pass
    returns the slice itself instead. A public function's result qualifies
    when it is a `memref.alloc` whose only other use is a `memref.copy` from
    a `memref.subview` of another `memref.alloc` in the same block, which
    after that copy is only read by copies, viewed and deallocated. The copy
    and the result's allocation go, the result type becomes the subview's
    strided type, and the base allocation's `memref.dealloc` goes: the
    caller owns it now.

    Calling convention: a result may be a strided view (its descriptor's
    sizes and strides say how to read it), and several results may share
    one allocation (the same `allocated` pointer): the caller frees each
    distinct allocation once. Weight-packing functions (`@f__pack`) keep
    contiguous results, since their results come back as arguments, and
    functions called inside the module keep their signature. Runs after
    bufferization and deallocation in both lowerings.

    In a weight-packing function, a result that is a copy of a weight
    argument (a weight `@f` reads unchanged) is that argument instead: the
    caller holds the weight anyway, and the copy doubled its memory for as
    long as the packed weights live. Such a packed result has the weight's
    `allocated` pointer; it is not the caller's to free separately.

    ```mlir
    %alloc = memref.alloc(%m) : memref<?x128xf32>
    linfuse.gemm ... outs(%alloc : memref<?x128xf32>)
    %q = memref.subview %alloc[0, 0] [%m, 64] [1, 1] : memref<?x128xf32> to memref<?x64xf32, strided<[128, 1]>>
    %r = memref.alloc(%m) : memref<?x64xf32>
    memref.copy %q, %r : memref<?x64xf32, strided<[128, 1]>> to memref<?x64xf32>
    memref.dealloc %alloc : memref<?x128xf32>
    return %r : memref<?x64xf32>
    // becomes
    %alloc = memref.alloc(%m) : memref<?x128xf32>
    linfuse.gemm ... outs(%alloc : memref<?x128xf32>)
    %q = memref.subview %alloc[0, 0] [%m, 64] [1, 1] : memref<?x128xf32> to memref<?x64xf32, strided<[128, 1]>>
    return %q : memref<?x64xf32, strided<[128, 1]>>
    ```
  }];
  let dependentDialects = ["::mlir::memref::MemRefDialect"];
}

def FuseElementwisePass : Pass<"linfuse-fuse-elementwise"> {
  let summary = "Fuse element-wise linalg producers into their consumers "
                "(one loop nest, no intermediate buffer)";
  let description = [{
    Upstream's element-wise fusion patterns
    (`linalg::populateElementwiseOpsFusionPatterns`), without the reshape
    propagation of `--linalg-fuse-elementwise-ops` (which would move
    reshapes across the views of merged GEMM results): an all-parallel
    `linalg.generic` whose result has one use, by another
    `linalg.generic`, becomes part of that consumer. RMSNorm's square goes
    into its mean, SwiGLU's SiLU into its multiply; each intermediate
    tensor, and the buffer and pass over memory it would cost, disappears.
    Producers with several users are left alone (fusing would compute them
    twice). Runs on tensors, after `--linfuse-raise-to-gemm` has taken the
    epilogues it can give to the GEMM library.

    ```mlir
    %s = linalg.generic {... ["parallel", "parallel"]} ins(%g) outs(%e0) {
      // silu
    }
    %m = linalg.generic {...} ins(%s, %u) outs(%e1) { mulf }
    // becomes one linalg.generic ins(%g, %u) outs(%e1) { silu; mulf }
    ```
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect"];
}

def ApproximateMathPass : Pass<"linfuse-approximate-math"> {
  let summary = "Rewrite f32 math functions (exp, tanh, erf, log, ...) as "
                "polynomials the loop vectorizer can vectorize";
  let description = [{
    Upstream's polynomial approximations
    (`populateMathPolynomialApproximationPatterns`, the ones IREE uses on
    CPUs) for f32 `math.exp`, `expm1`, `tanh`, `erf`, `log`, `log1p`,
    `log2`, `sin`, `cos`, `atan`, `atan2`, `asin`, `acos`: arithmetic
    instead of a libm call per element, so an activation's loop (SiLU,
    GELU, softmax-like) becomes vector code. f16/bf16 math is extended to
    f32 first (`--math-extend-to-supported-types`). Host lowering only: the
    CUDA lowering uses libdevice.

    ```mlir
    %e = math.exp %x : f32
    // becomes range reduction + a polynomial + exponent bit insertion
    // (arith ops only), max error a few ulp
    ```
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::math::MathDialect",
                           "::mlir::vector::VectorDialect"];
}

def ReassociateReductionsPass : Pass<"linfuse-reassociate-reductions"> {
  let summary = "Let floating-point sum and product reductions of "
                "linalg.generic be reassociated (vectorized)";
  let description = [{
    Sets `fastmath<reassoc>` on the combiner (`arith.addf`/`arith.mulf`
    that folds into the output) of every `linalg.generic` with a reduction
    iterator. Without it LLVM must add in order and leaves a norm's mean
    or a softmax's sum as a scalar loop; with it the sum is kept in vector
    lanes and added up at the end, as PyTorch's and oneDNN's reductions do.
    Results may differ from the in-order sum in the last bits. Nothing else
    changes: other ops keep their flags.

    ```mlir
    linalg.generic {... ["parallel", "reduction"]} ins(%x) outs(%acc) {
    ^bb0(%in: f32, %out: f32):
      %s = arith.addf %in, %out : f32
    // becomes
      %s = arith.addf %in, %out fastmath<reassoc> : f32
    ```
  }];
}

#endif // LINFUSE_CONVERSION_PASSES_TD
