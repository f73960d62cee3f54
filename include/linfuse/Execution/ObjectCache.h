//===- ObjectCache.h - JIT-compiled objects kept on disk --------*- C++ -*-===//
//
// Machine code the JIT generated for a lowered module, kept in a directory
// so that a later compilation of the same module for the same host (a script
// run again, another process) links it instead of running LLVM's optimizer
// and code generator: for a small function those are most of its compile
// time (a LLaMA layer's partition: 0.3 of 0.38 s).
//
//===----------------------------------------------------------------------===//

#ifndef LINFUSE_EXECUTION_OBJECTCACHE_H
#define LINFUSE_EXECUTION_OBJECTCACHE_H

#include "linfuse/Execution/Lowering.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/Error.h"

#include <memory>
#include <string>

namespace llvm {
class DataLayout;
class MemoryBuffer;
class TargetMachine;
namespace orc {
class LLJIT;
} // namespace orc
} // namespace llvm

namespace mlir::linfuse {

/// A directory of compiled objects. An entry is named by a hash of
/// everything that decides the object: the module as handed to the JIT
/// (LLVM dialect, printed in full), the target triple, CPU and features,
/// LLVM's version, the JIT's optimization levels and the compiler library
/// that lowered it. An entry holds a hash of its object, checked on load.
/// Entries are written under a temporary name and renamed, so processes
/// compiling together never read half an entry. Every failure (a directory
/// that cannot be written, a damaged entry) falls back to compiling: the
/// cache never makes a compilation fail. It holds at most a few thousand
/// entries (the least recently used go first).
class ObjectCache {
public:
  /// An empty `directory` caches nothing (load() misses, store() does not).
  explicit ObjectCache(std::string directory) : dir(std::move(directory)) {}

  bool enabled() const { return !dir.empty(); }

  /// The kinds of entry: an object (`<key>.o`), and what a compiled
  /// function is besides its object (`<key>.fn`, Executable's).
  static constexpr llvm::StringLiteral kObject = ".o", kFunction = ".fn";

  /// The key of `module` compiled for `host`; `salt` says what else decides
  /// the entry (optimization levels, options, the entry's name).
  /// `withLocations` prints them too (when what is stored names them).
  static std::string key(ModuleOp module, const llvm::TargetMachine &host,
                         llvm::StringRef salt, bool withLocations = false);

  /// The entry of `kind` stored under `key`; null when there is none or it
  /// does not match its hash (the entry is then removed).
  std::unique_ptr<llvm::MemoryBuffer>
  load(llvm::StringRef key, llvm::StringRef kind = kObject) const;

  /// Stores `bytes` under `key`; false when it could not.
  bool store(llvm::StringRef key, llvm::StringRef bytes,
             llvm::StringRef kind = kObject) const;

  /// A new empty file in the directory, for a writer that takes a path
  /// (ExecutionEngine::dumpToObjectFile); empty when none can be made.
  std::string temporaryFile() const;

private:
  std::string path(llvm::StringRef key, llvm::StringRef kind) const;
  /// Beyond kMaxEntries entries, removes the least recently stored or
  /// loaded quarter (by modification time, which load() updates).
  void evictLeastRecentlyUsed() const;
  std::string dir;
};

/// Gives what is named by process-wide counters in the LLVM-dialect
/// `module` names of the module's own, so that equal modules print equally
/// (and compile to the same object): private and internal globals are
/// numbered in the order they appear (upstream's assertion lowering numbers
/// its messages across the process), and the `dense_resource` blobs left in
/// it (weights folded at compile time, `linfuse_weight_N`) become dense
/// elements of the same bytes.
void makeNamesDeterministic(ModuleOp module);

/// Where compiled objects are kept unless the caller says otherwise:
/// $LINFUSE_CACHE_DIR, else $XDG_CACHE_HOME/linfuse, else ~/.cache/linfuse;
/// empty (no cache) when LINFUSE_JIT_CACHE=0 or there is no home directory.
std::string defaultObjectCacheDirectory();

/// A JIT holding `object` (code compiled by the ExecutionEngine for this
/// host), its calls resolved among the process's symbols and `constants`
/// bound to their symbols by address.
llvm::Expected<std::unique_ptr<llvm::orc::LLJIT>>
linkObject(std::unique_ptr<llvm::MemoryBuffer> object,
           const llvm::DataLayout &layout,
           llvm::ArrayRef<ExternalConstant> constants);

} // namespace mlir::linfuse

#endif // LINFUSE_EXECUTION_OBJECTCACHE_H
