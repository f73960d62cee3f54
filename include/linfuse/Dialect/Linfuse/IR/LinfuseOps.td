//===- LinfuseOps.td - linfuse operations ------------------*- tablegen -*-===//

#ifndef LINFUSE_DIALECT_LINFUSE_IR_LINFUSEOPS_TD
#define LINFUSE_DIALECT_LINFUSE_IR_LINFUSEOPS_TD

include "linfuse/Dialect/Linfuse/IR/LinfuseBase.td"
include "linfuse/Dialect/Linfuse/IR/LinfuseAttrs.td"
include "mlir/Interfaces/DestinationStyleOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/IR/OpAsmInterface.td"

def Linfuse_GemmElementType : AnyTypeOf<[F32, F16, BF16]>;
def Linfuse_GemmShaped : AnyTypeOf<[
    RankedTensorOf<[F32, F16, BF16, I8, I32]>,
    MemRefOf<[F32, F16, BF16, I8, I32]>]>;

def Linfuse_GemmOp : Linfuse_Op<"gemm", [
    DeclareOpInterfaceMethods<MemoryEffectsOpInterface>,
    DestinationStyleOpInterface,
    DeclareOpInterfaceMethods<OpAsmOpInterface, ["getAsmResultNames"]>]> {
  let summary = "GEMM with optional bias and activation epilogue";
  let description = [{
    Computes

    ```
    C = epilogue(alpha * op(A) * op(B) + beta * C + bias)
    ```

    where `op(X)` is `X` or its transpose (`transpose_a`, `transpose_b`),
    `bias` (optional) is a vector of length N broadcast along M, and
    `epilogue` is one of `#linfuse.epilogue<...>` (default `none`).
    Products are accumulated in f32 whatever the operand type.

    Operands are all ranked tensors (the op then returns the new `C`) or all
    memrefs (the op writes `C` in place and returns nothing): the op is
    destination-style, with `C` as its only init operand, and bufferizes like
    a linalg op. Memrefs may be strided; the leading dimension of each matrix
    comes from its layout, so a column slice of a wider buffer is used in
    place.

    Shapes, with `op(A)`: M x K, `op(B)`: K x N, `C`: M x N:

    | rank | A                       | B                       | C           | bias |
    |------|-------------------------|-------------------------|-------------|------|
    | 2    | M x K (K x M if transposed) | K x N (N x K if transposed) | M x N | N |
    | 3    | batch x (as rank 2)     | batch x (as rank 2)     | batch x M x N | N |

    Any dimension may be dynamic; static sizes must agree. A and B have the
    same element type (f32, f16 or bf16); C and bias have either that type
    or f32. Integer GEMMs take i8 A and B (signed, as `linalg.matmul`'s
    default `cast_signed` reads them) and accumulate in i32 C and bias,
    wrapping on overflow as `arith.addi` does, with alpha 1 and no
    activation.

    `beta = 0` (the default) means `C`'s incoming value is not read, so
    bufferization need not preserve it.

    Example, the nn.Linear layout (`[out, in]` weights) with bias and GELU:

    ```mlir
    %y = linfuse.gemm ins(%x, %w : tensor<?x768xbf16>, tensor<3072x768xbf16>)
           bias(%b : tensor<3072xbf16>) outs(%init : tensor<?x3072xbf16>)
           transpose_b epilogue = <gelu_tanh> -> tensor<?x3072xbf16>
    ```
  }];

  let arguments = (ins
    Linfuse_GemmShaped:$a,
    Linfuse_GemmShaped:$b,
    Optional<Linfuse_GemmShaped>:$bias,
    Linfuse_GemmShaped:$c,
    UnitAttr:$transpose_a,
    UnitAttr:$transpose_b,
    DefaultValuedAttr<F32Attr, "1.0f">:$alpha,
    DefaultValuedAttr<F32Attr, "0.0f">:$beta,
    DefaultValuedAttr<Linfuse_EpilogueAttr, "::mlir::linfuse::Epilogue::None">:$epilogue
  );
  let results = (outs Optional<AnyRankedTensor>:$result);

  let assemblyFormat = [{
    `ins` `(` $a `,` $b `:` type($a) `,` type($b) `)`
    (`bias` `(` $bias^ `:` type($bias) `)`)?
    `outs` `(` $c `:` type($c) `)`
    (`transpose_a` $transpose_a^)?
    (`transpose_b` $transpose_b^)?
    (`epilogue` `=` $epilogue^)?
    attr-dict
    (`->` type($result)^)?
  }];

  let builders = [
    OpBuilder<(ins "Value":$a, "Value":$b, "Value":$bias, "Value":$c,
                   CArg<"bool", "false">:$transposeA,
                   CArg<"bool", "false">:$transposeB,
                   CArg<"Epilogue", "Epilogue::None">:$epilogue,
                   CArg<"float", "1.0f">:$alpha,
                   CArg<"float", "0.0f">:$beta)>
  ];

  let extraClassDeclaration = [{
    /// Destination-style: C is the only init operand.
    MutableOperandRange getDpsInitsMutable() { return getCMutable(); }

    /// True for the tensor form (the op returns the updated C).
    bool hasPureTensorSemantics() { return getResult() != nullptr; }

    /// Rank of the operands (2, or 3 for a batched GEMM).
    int64_t getRank() { return cast<ShapedType>(getC().getType()).getRank(); }

    /// Sizes of the problem, ShapedType::kDynamic where unknown statically.
    int64_t getStaticM();
    int64_t getStaticN();
    int64_t getStaticK();

    /// True when the incoming value of C contributes to the result.
    bool readsC() { return getBeta().convertToFloat() != 0.0f; }
  }];

  let hasVerifier = 1;
}

#endif // LINFUSE_DIALECT_LINFUSE_IR_LINFUSEOPS_TD
