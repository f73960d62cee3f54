//===- LinfuseAttrs.td - linfuse attributes ----------------*- tablegen -*-===//

#ifndef LINFUSE_DIALECT_LINFUSE_IR_LINFUSEATTRS_TD
#define LINFUSE_DIALECT_LINFUSE_IR_LINFUSEATTRS_TD

include "linfuse/Dialect/Linfuse/IR/LinfuseBase.td"

def Linfuse_Epilogue : I32EnumAttr<"Epilogue",
    "element-wise function applied to each GEMM output element", [
      I32EnumAttrCase<"None", 0, "none">,
      I32EnumAttrCase<"Relu", 1, "relu">,
      I32EnumAttrCase<"GeluErf", 2, "gelu_erf">,
      I32EnumAttrCase<"GeluTanh", 3, "gelu_tanh">,
      I32EnumAttrCase<"Silu", 4, "silu">
    ]> {
  let cppNamespace = "::mlir::linfuse";
  let genSpecializedAttr = 0;
}

def Linfuse_EpilogueAttr : EnumAttr<Linfuse_Dialect, Linfuse_Epilogue, "epilogue"> {
  let summary = "GEMM epilogue activation";
  let description = [{
    The activation applied after `alpha * op(A) * op(B) + beta * C + bias`:

    | value       | function                                        |
    |-------------|-------------------------------------------------|
    | `none`      | identity                                        |
    | `relu`      | `max(x, 0)`                                     |
    | `gelu_erf`  | `0.5 x (1 + erf(x / sqrt(2)))` (exact GELU)     |
    | `gelu_tanh` | `0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))` |
    | `silu`      | `x * sigmoid(x)`                                |

    The first four are cuBLASLt epilogues; `silu` is applied by linfuse's
    runtime in the same pass over the output.

    Example: `#linfuse.epilogue<gelu_tanh>`.
  }];
  let assemblyFormat = "`<` $value `>`";
}

#endif // LINFUSE_DIALECT_LINFUSE_IR_LINFUSEATTRS_TD
