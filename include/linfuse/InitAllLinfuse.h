//===- InitAllLinfuse.h - register linfuse with a tool ------------*- C++
//-*-===//
//
// What a stack embedding linfuse calls: the dialect with its external
// interface models, and every pass and pipeline.
//
//===----------------------------------------------------------------------===//

#ifndef LINFUSE_INITALLLINFUSE_H
#define LINFUSE_INITALLLINFUSE_H

namespace mlir {
class DialectRegistry;
namespace linfuse {

/// Adds the linfuse dialect and its bufferization model to `registry`.
void registerLinfuseDialects(DialectRegistry &registry);

/// Registers every linfuse pass and pipeline with the global pass registry
/// (so `--linfuse-...` flags and `--pass-pipeline` names resolve).
void registerAllLinfusePasses();

} // namespace linfuse
} // namespace mlir

#endif // LINFUSE_INITALLLINFUSE_H
