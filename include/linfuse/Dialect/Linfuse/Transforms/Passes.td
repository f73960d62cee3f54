//===- Passes.td - linfuse transformation passes -----------*- tablegen -*-===//

#ifndef LINFUSE_DIALECT_LINFUSE_TRANSFORMS_PASSES_TD
#define LINFUSE_DIALECT_LINFUSE_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def MergeParallelMatmulsPass : Pass<"linfuse-merge-parallel-matmuls"> {
  let summary = "Merge matmuls that share an operand into one larger matmul";
  let description = [{
    Groups `linalg.matmul` / `linalg.batch_matmul` ops that read the same
    left-hand side (Q/K/V projections, LLaMA gate/up) and rewrites each group
    into ONE matmul over the weights concatenated along N, followed by a
    `tensor.extract_slice` per original result. The output uses upstream ops
    only (`linalg`, `tensor`, `arith`), so other stacks can run this pass alone.

    Before:

    ```mlir
    %q = linalg.matmul ins(%x, %wq : tensor<?x768xf32>, tensor<768x768xf32>) outs(%f0 : tensor<?x768xf32>) -> tensor<?x768xf32>
    %k = linalg.matmul ins(%x, %wk : tensor<?x768xf32>, tensor<768x256xf32>) outs(%f1 : tensor<?x256xf32>) -> tensor<?x256xf32>
    ```

    After:

    ```mlir
    %w = tensor.concat dim(1) %wq, %wk : (tensor<768x768xf32>, tensor<768x256xf32>) -> tensor<768x1024xf32>
    %m = linalg.matmul ins(%x, %w : tensor<?x768xf32>, tensor<768x1024xf32>) outs(%f : tensor<?x1024xf32>) -> tensor<?x1024xf32>
    %q = tensor.extract_slice %m[0, 0] [%d, 768] [1, 1] : tensor<?x1024xf32> to tensor<?x768xf32>
    %k = tensor.extract_slice %m[0, 768] [%d, 256] [1, 1] : tensor<?x1024xf32> to tensor<?x256xf32>
    ```

    Recognized forms: default and transposed-B `indexing_maps` (nn.Linear's
    `[out, in]` weights), a `linalg.transpose` of the weight feeding a plain
    matmul (torch-mlir), batch matmuls with per-batch weights, different N
    per member (GQA), dynamic M. When every member is followed by a bias-add
    (a `linalg.generic` adding a vector along the last dim, directly or
    through torch-mlir's broadcasting `linalg.generic`, possibly times
    torch's `alpha` of exactly 1; or `linalg.add` of a broadcast), the
    biases are concatenated too and one bias-add runs on the merged result;
    members with and without bias are never merged together.

    Legality: one group holds one element type per operand and result, the
    same K, indexing map of the shared operand and bias structure; no member
    may depend on another, and the merged op is placed after every operand it
    needs and before every user of a member. Weight preprocessing computed
    from constants and `linfuse.weight` arguments alone (casts, transposes,
    reshapes, dequantization: side-effect free, reading no matmul) does not
    limit placement: what of it comes after the merged op is cloned there
    and the originals die. Accumulators that are all the same constant fill
    become one fill; otherwise they are concatenated.

    With `merge-shared-rhs`, matmuls reading the same weight from different
    inputs are merged along M (inputs concatenated, results sliced by rows).

    Constant weights are concatenated at compile time by
    `--linfuse-fold-constant-weights`, which `--linfuse-optimize` runs next.

    Then the members' epilogues: when every column slice of a merged result
    feeds the same element-wise `linalg.generic` (a quantized model's i32
    bias and per-channel dequantization, a truncation to bf16, an
    activation), differing only in per-column vectors, one generic runs over
    the merged result with the vectors concatenated, and the slices move
    after it; step by step along the chain.

    Statistics (`-mlir-pass-statistics` in linfuse's tools): `groups-merged`,
    `matmuls-removed`, `bytes-concatenated`, `epilogues-merged`. With
    `--linfuse-remarks`, a remark at each merged matmul: "merged 3 matmuls
    sharing %x into one ?x2304 GEMM", and at each merged epilogue.
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect",
                           "::mlir::tensor::TensorDialect",
                           "::mlir::arith::ArithDialect"];
  let options = [
    Option<"minGroupSize", "min-group-size", "unsigned", /*default=*/"2",
           "Smallest number of matmuls merged into one">,
    Option<"maxMergedBytes", "max-merged-bytes", "int64_t",
           /*default=*/"1073741824",
           "Largest concatenated operand, in bytes (weights for shared-LHS "
           "groups, static-shaped inputs for shared-RHS groups)">,
    Option<"mergeSharedRhs", "merge-shared-rhs", "bool", /*default=*/"true",
           "Also merge matmuls sharing their right-hand side, along M">,
  ];
}

def SpecializeContractionsPass : Pass<"linfuse-specialize-contractions"> {
  let summary = "Rewrite contractions in any spelling as linalg.matmul / "
                "linalg.batch_matmul";
  let description = [{
    Recognizes a contraction by what it computes, not by its op name: a
    `linalg.generic`, `linalg.contract`, `linalg.matvec`, `linalg.vecmat`,
    `linalg.batch_matvec`, `linalg.batch_vecmat` (any linalg op on tensors
    with two inputs and one result) whose body is exactly
    `acc + cvt(a) * cvt(b)` (`cvt`: nothing or `arith.extf` to the
    accumulator's type) and whose indexing maps are those of a (batch)
    matmul with one M, N, K and batch dimension, plain or transposed, in any
    loop order. Each becomes the `linalg.matmul` / `linalg.batch_matmul`
    with explicit `indexing_maps` that the merge, the chain folding and the
    raise to `linfuse.gemm` handle. Element types are kept exactly: an
    f16 × f16 body accumulating in f32 is a `linalg.matmul` with f16 inputs
    and an f32 result (its implicit cast is the `arith.extf`); a trailing
    `arith.truncf` generic stays a separate element-wise op.

    A matrix-vector product becomes a one-row matmul over the vector
    (`tensor.expand_shape` to 1×K, the result collapsed back), the vector
    on the left: matvecs reading the same vector then share their left
    operand and merge like Q/K/V projections. Several batch loops (attention
    scores over [batch, heads, ...]) or several M loops (a linear layer on
    [batch, seq, hidden] activations) collapse into one with
    `tensor.collapse_shape` (no copy), the result expanded back.

    ```mlir
    #mk = affine_map<(m, n, k) -> (m, k)>
    #nk = affine_map<(m, n, k) -> (n, k)>
    #mn = affine_map<(m, n, k) -> (m, n)>
    %y = linalg.generic {indexing_maps = [#mk, #nk, #mn], iterator_types = ["parallel", "parallel", "reduction"]}
        ins(%x, %w : tensor<?x64xf16>, tensor<32x64xf16>) outs(%acc : tensor<?x32xf32>) {
      ^bb0(%a: f16, %b: f16, %c: f32):
        %0 = arith.extf %a : f16 to f32
        %1 = arith.extf %b : f16 to f32
        %2 = arith.mulf %0, %1 : f32
        %3 = arith.addf %c, %2 : f32
        linalg.yield %3 : f32
    } -> tensor<?x32xf32>
    // becomes
    %y = linalg.matmul indexing_maps = [#mk, #nk, #mn] ins(%x, %w : tensor<?x64xf16>, tensor<32x64xf16>) outs(%acc : tensor<?x32xf32>) -> tensor<?x32xf32>
    ```

    Left alone, with a remark under `--linfuse-remarks` saying why: integer
    contractions, bodies with anything besides the multiply-add and the
    extensions (a scale, a `truncf` of the accumulator every step, a unary
    op on an operand), maps that are not projected permutations
    (convolutions), several K or N dimensions, batch dimensions that do
    not lead every operand, dot products.

    Upstream's `--linalg-specialize-generic-ops` is not used: in MLIR 22 it
    drops transposed operand maps (a wrong matmul when M is dynamic) and
    treats any unary op around an operand as a cast (`exp(a) * b` becomes a
    matmul); it leaves `linalg.contract` and matvec alone. Measurements in
    docs/MergeParallelMatmuls.md.

    A `linalg.matmul` / `linalg.batch_matmul` in f32 whose two operands
    are each widened by an element-wise `arith.extf` generic from the same
    f16/bf16 (torch-mlir's bf16 Linear) reads the narrow values instead:
    the named op's own cast is that `extf`, so the product is the same
    (except for bf16 denormals, which oneDNN's bf16 kernels flush to zero,
    as PyTorch's do), and the library then multiplies f16/bf16 natively.

    Statistics: `contractions-specialized`, `operands-narrowed`.
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect",
                           "::mlir::tensor::TensorDialect"];
}

def FoldMatmulChainsPass : Pass<"linfuse-fold-matmul-chains"> {
  let summary = "Pre-multiply the weights of linear matmul chains, LoRA "
                "adapters, input scales and shifts";
  let description = [{
    Four rewrites of matmuls whose weights are known before the first call
    (constants, or `linfuse.weight` function arguments and values computed
    from them alone) and whose intermediate results have no other use:

    * **Chains** `x·A·B(·C…)` with nothing non-linear between them
      (bias-adds are linear: `(x·A + a)·B = x·(AB) + aB`) are re-associated.
      Which products are pre-multiplied at compile time is chosen by a
      dynamic program over the chain minimizing run-time FLOPs per row: a
      segment from dimension `d_i` to `d_j` costs `d_i·d_j`, so a square
      12×12 pair (288 → 144) folds and a rank-2 bottleneck (48 < 144) stays.
    * **Sums of linear branches of the same input**, e.g. LoRA
      `x·W + s·(x·A)·B` → `x·(W + s·AB)` (what peft's `merge()` does by
      hand): one matmul instead of three. It runs before the merge in
      `--linfuse-optimize`, so `x·W` and `x·A` are not merged instead.
    * **Input scales**: `x * g` with a constant `g` broadcast along K
      (RMSNorm/LayerNorm gamma) or a constant scalar, when every user of the
      scaled value is such a matmul, is folded into the weights' rows. On
      `linfuse.weight` arguments (a gamma or weights that arrive at run
      time) only with `policy=always`: there the scaled weights would be
      new buffers beside the caller's, a second copy of every weight the
      norm feeds (Q/K/V, gate and up: 70% of a LLaMA layer), to save one
      multiply per input element that the norm's element-wise loop does
      anyway. The scale then stays, with a remark saying why; the
      projections still merge over its result, into a plain concat of the
      weights that the packing function can view in place
      (`--linfuse-view-adjacent-weights`).
    * **Input shifts**: `x + v` with a constant `v` broadcast along K
      (LayerNorm beta), when every user is such a matmul, is folded into
      the biases: `(x + v)·W + c = x·W + (v·W + c)`; a bias-add is created
      where there was none. LayerNorm's gamma is then an input scale.

    Constant products are computed at compile time, in f64, and rounded
    once to the weights' type. For `linfuse.weight` arguments the products
    are emitted as IR instead (f64 accumulation, f32 for f16/bf16 weights,
    rounded once), for `--linfuse-lift-weight-packing` to move into the
    one-time packing function. Plain function arguments are never folded.

    `policy=cost` (default) folds only when run-time FLOPs drop; `always`
    folds whole chains regardless; `never` disables the pass. With
    `--linfuse-remarks` every fold, and every chain left alone for cost,
    gets a remark with the FLOP counts.

    Statistics: `chains-folded`, `sums-folded`, `scales-folded`,
    `shifts-folded`, `matmuls-removed`.
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect",
                           "::mlir::tensor::TensorDialect",
                           "::mlir::arith::ArithDialect"];
  let options = [
    Option<"policy", "policy", "::mlir::linfuse::FoldPolicy",
           /*default=*/"::mlir::linfuse::FoldPolicy::Cost",
           "When to fold", [{::llvm::cl::values(
             clEnumValN(::mlir::linfuse::FoldPolicy::Cost, "cost",
                        "only when run-time FLOPs per row drop"),
             clEnumValN(::mlir::linfuse::FoldPolicy::Always, "always",
                        "fold every chain whole"),
             clEnumValN(::mlir::linfuse::FoldPolicy::Never, "never",
                        "do nothing"))}]>,
    Option<"resourceThreshold", "resource-threshold", "int64_t",
           /*default=*/"4096",
           "Folded weights of at least this many bytes become "
           "dense_resource blobs">,
  ];
}

def LiftWeightPackingPass : Pass<"linfuse-lift-weight-packing", "::mlir::ModuleOp"> {
  let summary = "Move computation on weights into a one-time packing function";
  let description = [{
    For every `func.func @f` with arguments marked `linfuse.weight` (weights
    that arrive at run time rather than as constants), moves each side-effect
    free op that depends only on those arguments and on constants — the
    `tensor.concat` of merged weights, transposes, products of folded chains
    — into a new function `@f__pack`, run once at load time.

    Calling convention (what `linfuse-run` and embedders follow):

    * `@f__pack` takes the weight arguments of `@f`, in their original order,
      and returns the packed values: each value `@f` needs from the weights
      (lifted results first, in program order, then weights `@f` still reads
      directly, in argument order).
    * `@f` is rewritten to take its other arguments, in their original
      order, followed by the packed values, in `@f__pack`'s result order.
      Those arguments carry `linfuse.packed = <index>` (the result of
      `@f__pack` they receive); `@f` carries `linfuse.pack_function = @f__pack`.

    So `f(x, w)` becomes `p = f__pack(w)` once, then `f(x, p...)` per call.

    Before:

    ```mlir
    func.func @f(%x: tensor<?x64xf32>, %wq: tensor<64x64xf32> {linfuse.weight},
                 %wk: tensor<16x64xf32> {linfuse.weight}) -> tensor<?x80xf32> {
      %w = tensor.concat dim(0) %wq, %wk : ... -> tensor<80x64xf32>
      %y = linalg.matmul ... ins(%x, %w ...)
    ```

    After:

    ```mlir
    func.func @f__pack(%wq: tensor<64x64xf32> {linfuse.weight},
                       %wk: tensor<16x64xf32> {linfuse.weight}) -> tensor<80x64xf32> {
      %w = tensor.concat dim(0) %wq, %wk : ... -> tensor<80x64xf32>
      return %w : tensor<80x64xf32>
    }
    func.func @f(%x: tensor<?x64xf32>, %w: tensor<80x64xf32> {linfuse.packed = 0 : i64})
        -> tensor<?x80xf32> attributes {linfuse.pack_function = @f__pack} {
      %y = linalg.matmul ... ins(%x, %w ...)
    ```

    Functions without `linfuse.weight` arguments, or whose weights need no
    packing, are left as they are. Statistics: `functions-lifted`,
    `ops-lifted`.
  }];
  let dependentDialects = ["::mlir::func::FuncDialect"];
}

def RaiseToGemmPass : Pass<"linfuse-raise-to-gemm"> {
  let summary = "Raise linalg matmuls, with their bias-add and activation, to "
                "linfuse.gemm";
  let description = [{
    The first step of the lowering pipelines. Each `linalg.matmul` or
    `linalg.batch_matmul` on tensors whose indexing maps are plain or
    transpose A and/or B (the forms `linalg.matmul indexing_maps = [...]`
    and torch-mlir emit), with A and B of one element type (f32, f16, bf16)
    and C of that type or f32, becomes one `linfuse.gemm`:

    * a `linalg.fill` of zero as the accumulator becomes `beta = 0`, and the
      GEMM writes the filled tensor's destination without reading it;
    * a bias-add that is the matmul's only user (`linalg.generic` adding a
      vector along the last dimension, directly or through a broadcasting
      `linalg.generic` as torch-mlir emits it, possibly times an `alpha` of
      exactly 1; or `linalg.add` of a broadcast) becomes the `bias`
      operand;
    * an element-wise activation that is the only user of that result
      becomes the `epilogue`: relu, gelu (erf or tanh form) or silu. The
      activation is recognized by evaluating its body, not by the order of
      its ops, so every importer's spelling is found;
    * an `arith.truncf` (default rounding) of an f32 result to the f16/bf16
      of A and B, when C is not read (beta = 0), is done by the GEMM, which
      rounds once to nearest even after the epilogue: C takes that type. A
      bias must then be of it too, so it is taken only when its values are
      exact there (a constant that converts exactly, the `extf` of a narrow
      bias, a concatenation of those, a packed argument marked
      `linfuse.exact_in` by the weight lifting); otherwise the truncation
      stays.

    Anything else (other maps, integer types, a bias-add with other users) is
    left as it is; matmuls reading slices of a merged result raise like any
    other (the slices become strided views when bufferized).

    ```mlir
    %f = linalg.fill ins(%zero : f32) outs(%e : tensor<?x64xf32>) -> tensor<?x64xf32>
    %y = linalg.matmul ins(%x, %w : tensor<?x32xf32>, tensor<32x64xf32>) outs(%f : ...)
    %z = linalg.generic {... bias-add ...} ins(%y, %b : ...)
    %r = linalg.generic {... max(x, 0) ...} ins(%z : ...)
    // becomes
    %r = linfuse.gemm ins(%x, %w : tensor<?x32xf32>, tensor<32x64xf32>)
           bias(%b : tensor<64xf32>) outs(%e : tensor<?x64xf32>)
           epilogue = <relu> -> tensor<?x64xf32>
    ```

    Statistics: `gemms-raised`, `biases-fused`, `activations-fused`,
    `truncations-fused`.
  }];
  let dependentDialects = ["::mlir::linfuse::LinfuseDialect"];
  let options = [
    Option<"epilogues", "epilogues", "bool", /*default=*/"true",
           "Absorb bias-adds and activations into the GEMM epilogue">,
    Option<"target", "target", "std::string", /*default=*/"\"cpu\"",
           "Whose GEMMs and epilogues to use: cpu (all of them) or cuda "
           "(cuBLASLt: bias, relu, gelu_tanh; gelu_erf and silu stay "
           "element-wise kernels; i8 only with B stored N x K and N, K "
           "multiples of 4)">,
  ];
}

def FoldConstantWeightsPass : Pass<"linfuse-fold-constant-weights"> {
  let summary = "Concatenate, transpose and cast constant weights at compile time";
  let description = [{
    Folds `tensor.concat` of constants, `linalg.transpose`,
    `tensor.collapse_shape` and `tensor.expand_shape` of a constant, and an
    element-wise float cast of a constant (a `linalg.generic` with identity
    maps whose body is one `arith.extf` or `arith.truncf`, as torch-mlir
    casts bf16/f16 weights to f32; rounded to nearest even) into a single
    `arith.constant`. The data moves through the constants'
    raw buffers (memcpy of rows), never element by element through
    attributes, so multi-megabyte weights fold quickly. Inputs may be
    `dense<...>` or `dense_resource<...>`; results of at least
    `resource-threshold` bytes are written as `dense_resource` blobs.

    ```mlir
    %a = arith.constant dense<[[1.0], [2.0]]> : tensor<2x1xf32>
    %b = arith.constant dense<[[3.0], [4.0]]> : tensor<2x1xf32>
    %c = tensor.concat dim(1) %a, %b : (tensor<2x1xf32>, tensor<2x1xf32>) -> tensor<2x2xf32>
    // becomes
    %c = arith.constant dense<[[1.0, 3.0], [2.0, 4.0]]> : tensor<2x2xf32>
    ```

    Statistics: `constants-folded`, `bytes-folded`.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect"];
  let options = [
    Option<"resourceThreshold", "resource-threshold", "int64_t",
           /*default=*/"4096",
           "Folded constants of at least this many bytes become "
           "dense_resource blobs">,
  ];
}

#endif // LINFUSE_DIALECT_LINFUSE_TRANSFORMS_PASSES_TD
