//===- PassStatistics.cpp - statistics that count in release builds -------===//

#include "linfuse/Dialect/Linfuse/Transforms/PassStatistics.h"

#include "llvm/Support/Format.h"

#include <map>
#include <mutex>
#include <string>
#include <vector>

using namespace mlir;
using namespace mlir::linfuse;

namespace {
struct Entry {
  std::string pass, name, description;
  uint64_t value = 0;
};
struct Registry {
  std::mutex mutex;
  std::vector<Entry> entries; // In first-counted order.
  std::map<const void *, std::vector<Entry>> scoped;
};

void add(std::vector<Entry> &entries, llvm::StringRef pass,
         const std::string &name, const char *description, uint64_t delta) {
  for (Entry &e : entries) {
    if (e.pass == pass && e.name == name) {
      e.value += delta;
      return;
    }
  }
  entries.push_back({pass.str(), name, description, delta});
}

thread_local const void *threadScope = nullptr;
} // namespace

/// Never destroyed: the mlir-opt plugin prints it from an atexit handler,
/// which may run after static destructors.
static Registry &registry() {
  static Registry *instance = new Registry;
  return *instance;
}

PassStatistic &PassStatistic::operator+=(uint64_t delta) {
  Registry &r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  llvm::StringRef pass = owner->getArgument();
  add(r.entries, pass, name, description, delta);
  if (threadScope)
    add(r.scoped[threadScope], pass, name, description, delta);
  return *this;
}

const void *mlir::linfuse::swapPassStatisticScope(const void *scope) {
  const void *previous = threadScope;
  threadScope = scope;
  return previous;
}

std::vector<PassStatisticValue>
mlir::linfuse::takePassStatistics(const void *scope) {
  Registry &r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  std::vector<PassStatisticValue> values;
  auto it = r.scoped.find(scope);
  if (it == r.scoped.end())
    return values;
  for (Entry &e : it->second)
    values.push_back({e.pass, e.name, e.value});
  r.scoped.erase(it);
  return values;
}

uint64_t mlir::linfuse::getPassStatistic(llvm::StringRef passArgument,
                                         llvm::StringRef name) {
  Registry &r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  for (Entry &e : r.entries)
    if (e.pass == passArgument && e.name == name)
      return e.value;
  return 0;
}

void mlir::linfuse::printPassStatistics(llvm::raw_ostream &os) {
  Registry &r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  if (r.entries.empty())
    return;
  os << "===" << std::string(73, '-') << "===\n"
     << "                     ... linfuse pass statistics report ...\n"
     << "===" << std::string(73, '-') << "===\n";
  std::vector<std::string> passes;
  for (Entry &e : r.entries)
    if (llvm::find(passes, e.pass) == passes.end())
      passes.push_back(e.pass);
  for (const std::string &pass : passes) {
    os << pass << "\n";
    for (Entry &e : r.entries)
      if (e.pass == pass)
        os << llvm::format("  (S) %8llu %-28s - %s\n",
                           static_cast<unsigned long long>(e.value),
                           e.name.c_str(), e.description.c_str());
  }
}

void mlir::linfuse::resetPassStatistics() {
  Registry &r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.entries.clear();
}
