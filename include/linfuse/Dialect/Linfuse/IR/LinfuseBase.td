//===- LinfuseBase.td - linfuse dialect definition ---------*- tablegen -*-===//

#ifndef LINFUSE_DIALECT_LINFUSE_IR_LINFUSEBASE_TD
#define LINFUSE_DIALECT_LINFUSE_IR_LINFUSEBASE_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"

def Linfuse_Dialect : Dialect {
  let name = "linfuse";
  let cppNamespace = "::mlir::linfuse";
  let summary = "GEMMs with fused epilogues, the target of linfuse's lowering";
  let description = [{
    The `linfuse` dialect holds the one operation the linfuse pipeline lowers
    to: `linfuse.gemm`, a BLAS-style matrix multiply with an optional bias and
    activation epilogue, in the shape cuBLASLt and CBLAS expose it. Everything
    target-independent (merging parallel matmuls, folding chains) is done on
    upstream `linalg`/`tensor`/`arith` ops; `linfuse.gemm` appears only when a
    module is lowered for a target (`--linfuse-raise-to-gemm`).
  }];
  let useDefaultAttributePrinterParser = 1;
  let dependentDialects = ["::mlir::tensor::TensorDialect",
                           "::mlir::memref::MemRefDialect"];
}

class Linfuse_Op<string mnemonic, list<Trait> traits = []>
    : Op<Linfuse_Dialect, mnemonic, traits>;

#endif // LINFUSE_DIALECT_LINFUSE_IR_LINFUSEBASE_TD
