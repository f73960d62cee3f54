//===- Passes.td - linfuse transformation passes -----------*- tablegen -*-===//

#ifndef LINFUSE_DIALECT_LINFUSE_TRANSFORMS_PASSES_TD
#define LINFUSE_DIALECT_LINFUSE_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

#endif // LINFUSE_DIALECT_LINFUSE_TRANSFORMS_PASSES_TD
