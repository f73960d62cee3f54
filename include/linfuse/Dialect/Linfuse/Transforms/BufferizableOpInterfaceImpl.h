//===- BufferizableOpInterfaceImpl.h - linfuse bufferization ------*- C++
//-*-===//

#ifndef LINFUSE_DIALECT_LINFUSE_TRANSFORMS_BUFFERIZABLEOPINTERFACEIMPL_H
#define LINFUSE_DIALECT_LINFUSE_TRANSFORMS_BUFFERIZABLEOPINTERFACEIMPL_H

namespace mlir {
class DialectRegistry;
namespace linfuse {
/// Attaches the BufferizableOpInterface external model to linfuse.gemm.
void registerBufferizableOpInterfaceExternalModels(DialectRegistry &registry);
} // namespace linfuse
} // namespace mlir

#endif // LINFUSE_DIALECT_LINFUSE_TRANSFORMS_BUFFERIZABLEOPINTERFACEIMPL_H
