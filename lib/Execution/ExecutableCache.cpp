//===- ExecutableCache.cpp - compiled functions kept on disk --------------===//
//
// The object cache (ObjectCache.h) keyed on the lowered module skips LLVM;
// this keys a whole compiled function on the module as given, so that
// compiling it again also skips linfuse's passes (optimize and lower: 60-75
// ms of a LLaMA layer's partition once LLVM is skipped). What the passes
// decided that the executable keeps is stored beside the object's key as
// JSON: the packing function's name, the packed weights' types and the
// groups that are row concatenations, the GEMM-only weights, and the report
// (remarks with their source locations, counters).
//
//===----------------------------------------------------------------------===//

#include "linfuse/Execution/Executable.h"
#include "linfuse/Execution/ObjectCache.h"
#include "linfuse/Execution/PassReport.h"

#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ExecutionEngine/Orc/LLJIT.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Target/TargetMachine.h"

#include <limits>

using namespace mlir;
using namespace mlir::linfuse;
namespace json = llvm::json;

std::string Executable::cacheKey(ModuleOp module, llvm::StringRef entry,
                                 const CompileOptions &options,
                                 const llvm::TargetMachine &host) {
  // Everything of the options that changes what compile() makes; the
  // locations are printed (the remarks name them).
  std::string salt;
  llvm::raw_string_ostream os(salt);
  // (compile() always lowers with releaseOnPack off.)
  os << "function v1, entry " << entry << ", optimize " << options.optimize
     << ", runtime checks " << options.lower.runtimeChecks << ", cuda graph "
     << options.lower.cudaGraph;
  return ObjectCache::key(module, host, salt, /*withLocations=*/true);
}

static json::Array toJson(llvm::ArrayRef<TensorSignature> types) {
  json::Array out;
  for (const TensorSignature &t : types)
    out.push_back(json::Object{{"type", toString(t.type)},
                               {"shape", json::Array(t.shape)}});
  return out;
}

void Executable::remember(const ObjectCache &cache, llvm::StringRef key,
                          llvm::StringRef objectKey, const PassReport *report,
                          size_t firstRemark, size_t firstStatistic) const {
  // Without a report the passes collected none: storing that would give a
  // later compilation that asks for one an empty report.
  if (key.empty() || !code || !code->constants.empty() || !report)
    return;
  json::Array groups, gemmOnly, remarks, statistics;
  for (const std::vector<unsigned> &g : weightGroups)
    groups.push_back(json::Array(g));
  for (bool b : gemmOnlyWeights)
    gemmOnly.push_back(b);
  for (size_t i = firstRemark; i < report->remarks.size(); ++i) {
    const Remark &r = report->remarks[i];
    remarks.push_back(json::Object{{"pass", r.pass},
                                   {"name", r.location.name},
                                   {"file", r.location.file},
                                   {"line", r.location.line},
                                   {"column", r.location.column},
                                   {"message", r.message}});
  }
  for (size_t i = firstStatistic; i < report->statistics.size(); ++i) {
    const PassStatisticValue &s = report->statistics[i];
    statistics.push_back(json::Object{
        {"pass", s.pass}, {"name", s.name}, {"value", int64_t(s.value)}});
  }
  json::Object entry{{"object", objectKey},
                     {"pack", packName},
                     {"packed", toJson(packedTypes)},
                     {"groups", std::move(groups)},
                     {"gemm_only", std::move(gemmOnly)},
                     {"embeds_constants", code->embedsConstants},
                     {"remarks", std::move(remarks)},
                     {"statistics", std::move(statistics)}};
  std::string text;
  llvm::raw_string_ostream os(text);
  os << json::Value(std::move(entry));
  cache.store(key, text, ObjectCache::kFunction);
}

namespace {
/// What restore() reads back; every field checked.
struct Stored {
  std::string object, pack;
  llvm::SmallVector<TensorSignature> packed;
  std::vector<std::vector<unsigned>> groups;
  std::vector<bool> gemmOnly;
  bool embedsConstants = false;
  std::vector<Remark> remarks;
  std::vector<PassStatisticValue> statistics;
};
} // namespace

/// A non-negative integer that fits `unsigned`.
static std::optional<unsigned> toUnsigned(const json::Value &v) {
  std::optional<uint64_t> n = v.getAsUINT64();
  if (!n || *n > std::numeric_limits<unsigned>::max())
    return std::nullopt;
  return unsigned(*n);
}

/// A key as ObjectCache::key makes them (never a path).
static bool isKey(llvm::StringRef s) {
  return s.size() == 64 && llvm::all_of(s, [](char c) {
           return llvm::isDigit(c) || (c >= 'a' && c <= 'f');
         });
}

static std::optional<Stored> parse(llvm::StringRef text) {
  auto value = json::parse(text);
  if (!value) {
    llvm::consumeError(value.takeError());
    return std::nullopt;
  }
  const json::Object *o = value->getAsObject();
  if (!o)
    return std::nullopt;
  Stored s;
  auto object = o->getString("object");
  auto pack = o->getString("pack");
  auto embeds = o->getBoolean("embeds_constants");
  const json::Array *packed = o->getArray("packed");
  const json::Array *groups = o->getArray("groups");
  const json::Array *gemmOnly = o->getArray("gemm_only");
  const json::Array *remarks = o->getArray("remarks");
  const json::Array *statistics = o->getArray("statistics");
  if (!object || !pack || !embeds || !packed || !groups || !gemmOnly ||
      !remarks || !statistics)
    return std::nullopt;
  if (!isKey(*object))
    return std::nullopt;
  s.object = object->str();
  s.pack = pack->str();
  s.embedsConstants = *embeds;
  for (const json::Value &v : *packed) {
    const json::Object *t = v.getAsObject();
    std::optional<ElementType> type;
    if (t)
      if (auto name = t->getString("type"))
        type = parseElementType(*name);
    const json::Array *shape = t ? t->getArray("shape") : nullptr;
    if (!type || !shape)
      return std::nullopt;
    TensorSignature sig{*type, {}, false};
    for (const json::Value &d : *shape) {
      auto n = d.getAsInteger();
      if (!n)
        return std::nullopt;
      sig.shape.push_back(*n);
    }
    s.packed.push_back(std::move(sig));
  }
  for (const json::Value &v : *groups) {
    const json::Array *g = v.getAsArray();
    if (!g)
      return std::nullopt;
    std::vector<unsigned> group;
    for (const json::Value &i : *g) {
      auto n = toUnsigned(i);
      if (!n)
        return std::nullopt;
      group.push_back(*n);
    }
    s.groups.push_back(std::move(group));
  }
  for (const json::Value &v : *gemmOnly) {
    auto b = v.getAsBoolean();
    if (!b)
      return std::nullopt;
    s.gemmOnly.push_back(*b);
  }
  for (const json::Value &v : *remarks) {
    const json::Object *r = v.getAsObject();
    if (!r)
      return std::nullopt;
    auto pass = r->getString("pass"), name = r->getString("name"),
         file = r->getString("file"), message = r->getString("message");
    const json::Value *lineValue = r->get("line");
    const json::Value *columnValue = r->get("column");
    std::optional<unsigned> line, column;
    if (lineValue && columnValue) {
      line = toUnsigned(*lineValue);
      column = toUnsigned(*columnValue);
    }
    if (!pass || !name || !file || !message || !line || !column)
      return std::nullopt;
    s.remarks.push_back(
        Remark{pass->str(),
               SourceLocation{name->str(), file->str(), unsigned(*line),
                              unsigned(*column)},
               message->str()});
  }
  for (const json::Value &v : *statistics) {
    const json::Object *c = v.getAsObject();
    if (!c)
      return std::nullopt;
    auto pass = c->getString("pass"), name = c->getString("name");
    const json::Value *countValue = c->get("value");
    std::optional<uint64_t> count =
        countValue ? countValue->getAsUINT64() : std::nullopt;
    if (!pass || !name || !count)
      return std::nullopt;
    s.statistics.push_back({pass->str(), name->str(), *count});
  }
  return s;
}

/// What can be checked against the function as given, which takes
/// `weights` weights (the hash only catches damage): one GEMM-only flag per
/// weight the entry takes (packed ones with a packing function), groups of
/// at least two weights in range.
static bool consistent(const Stored &stored, size_t weights) {
  size_t entryWeights = stored.pack.empty() ? weights : stored.packed.size();
  if (stored.gemmOnly.size() != entryWeights ||
      (stored.pack.empty() && !stored.packed.empty()))
    return false;
  return llvm::all_of(stored.groups, [&](const std::vector<unsigned> &g) {
    return g.size() >= 2 &&
           llvm::all_of(g, [&](unsigned i) { return i < weights; });
  });
}

bool Executable::linkStoredObject(const ObjectCache &cache, llvm::StringRef key,
                                  const llvm::TargetMachine &host) {
  auto object = cache.load(key);
  if (!object)
    return false;
  auto linked =
      linkObject(std::move(object), host.createDataLayout(), code->constants);
  if (!linked) {
    llvm::consumeError(linked.takeError());
    return false;
  }
  code->linked = std::move(*linked);
  if (llvm::Error err = lookUpFunctions(*this)) {
    llvm::consumeError(std::move(err));
    functions.clear();
    code->linked.reset();
    return false;
  }
  return true;
}

bool Executable::restore(const ObjectCache &cache, llvm::StringRef key,
                         const llvm::TargetMachine &host,
                         const CompileOptions &options) {
  auto text = cache.load(key, ObjectCache::kFunction);
  if (!text)
    return false;
  std::optional<Stored> stored = parse(text->getBuffer());
  if (!stored || !consistent(*stored, args.size() - numActivations()))
    return false;
  code = std::make_shared<Code>();
  code->embedsConstants = stored->embedsConstants;
  packName = stored->pack;
  packedTypes = stored->packed;
  weightGroups = stored->groups;
  gemmOnlyWeights = stored->gemmOnly;
  if (!linkStoredObject(cache, stored->object, host)) {
    code.reset();
    packName.clear();
    packedTypes.clear();
    weightGroups.clear();
    gemmOnlyWeights.clear();
    return false;
  }
  if (options.progress)
    options.progress("load");
  if (options.report) {
    llvm::append_range(options.report->remarks, stored->remarks);
    llvm::append_range(options.report->statistics, stored->statistics);
    options.report->statistics.push_back(
        {"linfuse-jit", "objects-from-cache", 1});
  }
  return true;
}
