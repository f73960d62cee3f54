//===- linfuse-compile.cpp - ahead-of-time shared libraries ---------------===//
//
// linfuse-compile FILE --target=cpu -o libNAME.so
//
// Optimizes and lowers every function of FILE, emits an object file with
// LLVM, links it into a shared library that depends only on
// liblinfuse_runtime.so (and libc/libm), and writes a C header declaring
// `_mlir_ciface_<fn>` for each public function with its memref descriptor
// types, and `linfuse_call_<fn>`, the same call with shape checks and an
// error code. Every failure is one line on stderr and exit code 1.
//
//===----------------------------------------------------------------------===//

#include "linfuse/Execution/Lowering.h"
#include "linfuse/Tools/ModuleLoading.h"
#include "linfuse/Tools/ToolContext.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/TargetParser/Host.h"

using namespace mlir;
using namespace mlir::linfuse;
namespace cl = llvm::cl;

static cl::OptionCategory category("linfuse-compile options");
static cl::opt<std::string> inputFile(cl::Positional,
                                      cl::desc("<input .mlir file>"),
                                      cl::Required, cl::cat(category));
static cl::opt<std::string> outputFile("o", cl::desc("Output shared library"),
                                       cl::value_desc("libNAME.so"),
                                       cl::Required, cl::cat(category));
static cl::opt<std::string> target("target", cl::desc("cpu (CBLAS) or cuda"),
                                   cl::init("cpu"), cl::cat(category));
static cl::opt<bool> noOptimize("no-optimize",
                                cl::desc("Skip --linfuse-optimize"),
                                cl::cat(category));
static cl::opt<std::string>
    headerFile("header",
               cl::desc("C header to write (default: the output with .h)"),
               cl::cat(category));
static cl::opt<std::string>
    mcpu("mcpu",
         cl::desc("CPU to generate code for: a name (x86-64-v3), 'native' for "
                  "this machine, or empty for the target's generic CPU"),
         cl::init(""), cl::cat(category));
static cl::opt<std::string> runtimeDir(
    "runtime-dir",
    cl::desc("Directory of liblinfuse_runtime.so (default: ../lib next to "
             "this tool); also the library's rpath"),
    cl::cat(category));
static cl::opt<bool> runtimeChecks(
    "runtime-checks",
    cl::desc(
        "Check at run time that operand sizes agree and indices are in "
        "bounds (default on; a failed check prints its location and "
        "ends the call with an error in linfuse_call_<fn>, aborts the process "
        "in _mlir_ciface_<fn>; =false saves their cost)"),
    cl::init(true), cl::cat(category));
static cl::opt<bool> cudaGraph(
    "cuda-graph",
    cl::desc("cuda: capture each function's device work into a CUDA graph "
             "on its first call with given arguments, replay it on later "
             "calls with the same ones (one launch instead of one per "
             "kernel and GEMM)"),
    cl::cat(category));
static cl::opt<bool> keepObject("keep-object",
                                cl::desc("Keep the intermediate .o file"),
                                cl::cat(category));

static int fail(const llvm::Twine &message) {
  llvm::errs() << "linfuse-compile: error: " << message << "\n";
  return 1;
}
static int fail(llvm::Error err) {
  return fail(llvm::toString(std::move(err)));
}

namespace {
/// A public function's signature as the C header spells it.
struct CFunction {
  std::string name;
  SmallVector<RankedTensorType> args, results;
  SmallVector<std::string> argNotes;
  /// `linfuse.name` of each argument (the weight's name in the model and
  /// its safetensors file), empty where there is none.
  SmallVector<std::string> argNames;
  /// `linfuse.packed` of each argument (its result of the packing
  /// function), -1 where there is none.
  SmallVector<int64_t> packedResult;
  /// The packing function (`linfuse.pack_function`), empty without one.
  std::string packFunction;
};
} // namespace

static std::optional<StringRef> cElementType(Type t) {
  if (t.isF32())
    return StringRef("float");
  if (t.isF64())
    return StringRef("double");
  if (t.isF16() || t.isBF16())
    return StringRef("uint16_t");
  if (t.isInteger(64))
    return StringRef("int64_t");
  if (t.isInteger(32))
    return StringRef("int32_t");
  if (t.isInteger(8) || t.isInteger(1))
    return StringRef("int8_t");
  return std::nullopt;
}

static std::string typeSuffix(Type t) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << t;
  return s;
}

/// `linfuse_memref_f32_2d`.
static std::string descriptorName(RankedTensorType t) {
  return "linfuse_memref_" + typeSuffix(t.getElementType()) + "_" +
         std::to_string(t.getRank()) + "d";
}

static llvm::Expected<SmallVector<CFunction, 0>> collectSignatures(ModuleOp m) {
  SmallVector<CFunction, 0> fns;
  for (auto fn : m.getOps<func::FuncOp>()) {
    if (!fn.isPublic() || fn.isExternal())
      continue;
    CFunction c;
    c.name = fn.getName().str();
    if (auto pack =
            fn->getAttrOfType<FlatSymbolRefAttr>("linfuse.pack_function"))
      c.packFunction = pack.getValue().str();
    auto check =
        [&](Type t,
            const llvm::Twine &what) -> llvm::Expected<RankedTensorType> {
      auto ranked = dyn_cast<RankedTensorType>(t);
      if (!ranked || !cElementType(ranked.getElementType()))
        return llvm::createStringError(
            llvm::inconvertibleErrorCode(),
            what + " of @" + c.name +
                " is not a ranked tensor of f32, f64, f16, bf16, i64, i32, "
                "i8 or i1");
      return ranked;
    };
    for (auto [i, t] : llvm::enumerate(fn.getArgumentTypes())) {
      auto ranked = check(t, "argument " + llvm::Twine(i));
      if (!ranked)
        return ranked.takeError();
      c.args.push_back(*ranked);
      std::string note;
      if (fn.getArgAttr(i, "linfuse.weight"))
        note = "weight";
      if (auto p = fn.getArgAttrOfType<IntegerAttr>(i, "linfuse.packed"))
        note = "packed weight " + std::to_string(p.getInt()) + " (result " +
               std::to_string(p.getInt()) + " of the packing function)";
      c.argNotes.push_back(note);
      auto name = fn.getArgAttrOfType<StringAttr>(i, "linfuse.name");
      c.argNames.push_back(name ? name.str() : "");
      auto packed = fn.getArgAttrOfType<IntegerAttr>(i, "linfuse.packed");
      c.packedResult.push_back(packed ? packed.getInt() : -1);
    }
    for (auto [i, t] : llvm::enumerate(fn.getResultTypes())) {
      auto ranked = check(t, "result " + llvm::Twine(i));
      if (!ranked)
        return ranked.takeError();
      c.results.push_back(*ranked);
    }
    fns.push_back(std::move(c));
  }
  return fns;
}

static std::string tensorString(RankedTensorType t) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << t;
  return s;
}

/// `linfuse_call_<fn>`: _mlir_ciface_<fn> with every argument's sizes
/// checked against the signature (compiled code trusts static sizes) and
/// run inside linfuse_call (a failed run-time check returns an error
/// instead of aborting). `resultParam` is the results parameter as
/// declared, "" when there are none.
/// `static const int64_t <name>[] = {...};`: `t`'s sizes, -1 where dynamic
/// (what the runtime's shape checks take).
static void writeShapeArray(llvm::raw_ostream &os, StringRef name,
                            RankedTensorType t) {
  os << "  static const int64_t " << name << "[] = {";
  for (auto [d, size] : llvm::enumerate(t.getShape()))
    os << (d ? ", " : "") << (ShapedType::isDynamic(size) ? int64_t(-1) : size);
  os << "};\n";
}

static void writeCheckedCall(llvm::raw_ostream &os, const CFunction &fn,
                             StringRef resultParam) {
  SmallVector<std::string> params, types;
  if (!resultParam.empty()) {
    params.push_back(resultParam.str());
    types.push_back(resultParam.rsplit('*').first.str() + "*");
  }
  for (auto [i, t] : llvm::enumerate(fn.args)) {
    params.push_back(descriptorName(t) + " *arg" + std::to_string(i));
    types.push_back(descriptorName(t) + " *");
  }
  os << "static inline void linfuse_thunk_" << fn.name << "(void **a) {\n"
     << "  _mlir_ciface_" << fn.name << "(";
  for (auto [i, type] : llvm::enumerate(types))
    os << (i ? ",\n      " : "") << "(" << type << ")a[" << i << "]";
  os << ");\n}\n\n"
     << "/* _mlir_ciface_" << fn.name
     << ", with the arguments' shapes checked against the\n"
        " * signature and its run-time checks returning instead of aborting:\n"
        " * LINFUSE_OK, or the error (LINFUSE_ERROR_INVALID_ARGUMENT for a\n"
        " * shape the signature does not take, LINFUSE_ERROR_CHECK_FAILED for\n"
        " * sizes that do not fit together) with "
        "linfuse_last_error_message().\n"
        " * Results are written only on success. */\n"
     << "static inline int32_t linfuse_call_" << fn.name << "(";
  if (params.empty())
    os << "void";
  for (auto [i, p] : llvm::enumerate(params))
    os << (i ? ",\n    " : "") << p;
  os << ") {\n";
  for (auto [i, t] : llvm::enumerate(fn.args)) {
    if (t.getRank() == 0)
      continue;
    writeShapeArray(os, "expected" + std::to_string(i), t);
  }
  os << "  void *a[] = {";
  if (params.empty())
    os << "0";
  bool first = true;
  if (!resultParam.empty()) {
    os << resultParam.rsplit('*').second;
    first = false;
  }
  for (size_t i = 0; i < fn.args.size(); ++i) {
    os << (first ? "" : ", ") << "arg" << i;
    first = false;
  }
  os << "};\n  int32_t status;\n  linfuse_clear_error();\n";
  for (auto [i, t] : llvm::enumerate(fn.args)) {
    if (t.getRank() == 0)
      continue;
    os << "  if ((status = linfuse_check_argument_sizes(\"" << fn.name << "\", "
       << i << ", " << t.getRank() << ", arg" << i << "->sizes, expected" << i
       << ")) != 0)\n    return status;\n";
  }
  os << "  return linfuse_call(linfuse_thunk_" << fn.name << ", a);\n}\n\n";
}

/// safetensors' spelling of an element type.
static StringRef safetensorsDtype(Type t) {
  if (t.isF32())
    return "F32";
  if (t.isF64())
    return "F64";
  if (t.isF16())
    return "F16";
  if (t.isBF16())
    return "BF16";
  if (t.isInteger(64))
    return "I64";
  if (t.isInteger(32))
    return "I32";
  if (t.isInteger(8))
    return "I8";
  return "BOOL"; // i1, the last type cElementType takes.
}

/// The arguments of `fn` that carry `linfuse.name` (its weights).
static SmallVector<size_t> namedArguments(const CFunction &fn) {
  SmallVector<size_t> named;
  for (auto [i, name] : llvm::enumerate(fn.argNames))
    if (!name.empty())
      named.push_back(i);
  return named;
}

/// `linfuse_bind_<fn>`: fills the named (weight) arguments of `fn` from a
/// safetensors file, each checked against the argument's type.
static void writeWeightBinder(llvm::raw_ostream &os, const CFunction &fn) {
  SmallVector<size_t> named = namedArguments(fn);
  if (named.empty())
    return;
  os << "/* Binds the weight arguments of @" << fn.name
     << " to the tensors of a safetensors file\n"
        " * opened with linfuse_weights_open() (the file the model's weights\n"
        " * were exported to), each checked against the argument's dtype and\n"
        " * shape:\n";
  for (size_t i : named)
    os << " *   arg" << i << " <- \"" << fn.argNames[i] << "\"\n";
  os << " * The views read the file in place until linfuse_weights_close().\n"
        " * LINFUSE_OK, or the error with linfuse_last_error_message(). */\n"
     << "static inline int32_t linfuse_bind_" << fn.name
     << "(linfuse_weights *weights";
  for (size_t i : named)
    os << ",\n    " << descriptorName(fn.args[i]) << " *arg" << i;
  os << ") {\n  int32_t status;\n";
  for (size_t i : named) {
    RankedTensorType t = fn.args[i];
    std::string shape = "0";
    if (t.getRank() > 0) {
      shape = "shape" + std::to_string(i);
      writeShapeArray(os, shape, t);
    }
    os << "  if ((status = linfuse_weights_bind(weights, \"" << fn.argNames[i]
       << "\", \"" << safetensorsDtype(t.getElementType()) << "\", "
       << t.getRank() << ", " << shape << ", arg" << i
       << ")) != 0)\n    return status;\n";
  }
  os << "  return 0;\n}\n\n";
}

/// The parameter that receives `fn`'s results ("<desc> *result" or
/// "<fn>_results *results"), empty without results.
static std::string resultParameter(const CFunction &fn) {
  if (fn.results.size() == 1)
    return descriptorName(fn.results[0]) + " *result";
  if (fn.results.size() > 1)
    return fn.name + "_results *results";
  return "";
}

/// `<fn>_model` and linfuse_load_/run_/unload_<fn> (CPU libraries): @fn
/// with its weights bound from a safetensors file and packed once, for a
/// function whose weight arguments (or its packing function's) all carry
/// names. The caller passes only the other arguments.
static void writeModelApi(llvm::raw_ostream &os, const CFunction &fn,
                          ArrayRef<CFunction> fns) {
  if (llvm::any_of(fns, [&](const CFunction &other) {
        return other.packFunction == fn.name;
      }))
    return; // A packing function: its caller's model runs it.
  const CFunction *pack = nullptr;
  if (!fn.packFunction.empty()) {
    for (const CFunction &other : fns)
      if (other.name == fn.packFunction)
        pack = &other;
    if (!pack || pack->results.empty() ||
        llvm::any_of(pack->argNames, [](auto &n) { return n.empty(); }))
      return;
  }
  // The weights bound from the file: the packing function's arguments, or
  // @fn's named arguments when nothing is packed.
  const CFunction &bound = pack ? *pack : fn;
  SmallVector<size_t> weights = namedArguments(bound);
  if (weights.empty())
    return;
  std::string model = fn.name + "_model";
  os << "/* @" << fn.name
     << " with its weights: from a safetensors file, bound in place";
  if (pack)
    os << " and\n * packed once by @" << pack->name;
  os << ". */\ntypedef struct {\n  linfuse_weights *weights;\n";
  for (size_t i : weights)
    os << "  " << descriptorName(bound.args[i]) << " w" << i << "; /* \""
       << bound.argNames[i] << "\" */\n";
  if (pack)
    os << "  "
       << (pack->results.size() == 1 ? descriptorName(pack->results[0])
                                     : pack->name + "_results")
       << " packed;\n";
  os << "} " << model << ";\n\n";

  // Load: open, bind, pack.
  os << "/* Opens the safetensors file `path` and binds the weights to its "
        "tensors\n * (read in place, dtypes and shapes checked)"
     << (pack ? ", then packs them" : "")
     << ".\n * LINFUSE_OK, or the error with linfuse_last_error_message(); "
        "nothing\n * stays open after an error. */\n"
     << "static inline int32_t linfuse_load_" << fn.name << "(" << model
     << " *m, const char *path) {\n  int32_t status;\n"
     << "  m->weights = linfuse_weights_open(path);\n"
     << "  if (!m->weights)\n    return 1; /* LINFUSE_ERROR_INVALID_ARGUMENT "
        "*/\n"
     << "  status = linfuse_bind_" << bound.name << "(m->weights";
  for (size_t i : weights)
    os << ", &m->w" << i;
  os << ");\n";
  if (pack) {
    os << "  if (status == 0)\n    status = linfuse_call_" << pack->name
       << "(&m->packed";
    for (size_t i = 0; i < pack->args.size(); ++i)
      os << ", &m->w" << i;
    os << ");\n";
  }
  os << "  if (status != 0) {\n    linfuse_weights_close(m->weights);\n"
        "    m->weights = 0;\n  }\n  return status;\n}\n\n";

  // Run: the other arguments from the caller.
  std::string resultParam = resultParameter(fn);
  os << "/* linfuse_call_" << fn.name
     << " with the model's weights: the results, then the\n"
        " * arguments that are not weights, in order. */\n"
     << "static inline int32_t linfuse_run_" << fn.name << "(" << model
     << " *m";
  if (!resultParam.empty())
    os << ", " << resultParam;
  SmallVector<std::string> callArgs;
  if (!resultParam.empty())
    callArgs.push_back(StringRef(resultParam).rsplit('*').second.str());
  for (auto [i, t] : llvm::enumerate(fn.args)) {
    if (pack && fn.packedResult[i] >= 0) {
      callArgs.push_back(pack->results.size() == 1
                             ? "&m->packed"
                             : "&m->packed.r" +
                                   std::to_string(fn.packedResult[i]));
    } else if (!pack && !fn.argNames[i].empty()) {
      callArgs.push_back("&m->w" + std::to_string(i));
    } else {
      os << ",\n    " << descriptorName(t) << " *arg" << i;
      callArgs.push_back("arg" + std::to_string(i));
    }
  }
  os << ") {\n  return linfuse_call_" << fn.name << "("
     << llvm::join(callArgs, ", ") << ");\n}\n\n";

  // Unload: the packed buffers that are not the file's tensors, once each.
  os << "/* Frees the packed weights and closes the file. */\n"
     << "static inline void linfuse_unload_" << fn.name << "(" << model
     << " *m) {\n";
  if (pack) {
    size_t n = pack->results.size();
    os << "  void *owned[" << n << "];\n  int count = 0, i, j;\n"
       << "  void *packed[" << n << "] = {";
    for (size_t j = 0; j < n; ++j)
      os << (j ? ", " : "")
         << (n == 1 ? "m->packed.allocated"
                    : "m->packed.r" + std::to_string(j) + ".allocated");
    os << "};\n  for (i = 0; i < " << n << "; ++i) {\n"
       << "    int keep = 0;\n";
    for (size_t i : weights)
      os << "    keep |= packed[i] == (void *)m->w" << i << ".allocated;\n";
    os << "    for (j = 0; j < count; ++j)\n"
          "      keep |= packed[i] == owned[j];\n"
          "    if (!keep)\n      free(owned[count++] = packed[i]);\n  }\n";
  }
  os << "  linfuse_weights_close(m->weights);\n  m->weights = 0;\n}\n\n";
}

static void writeHeader(llvm::raw_ostream &os, ArrayRef<CFunction> fns,
                        StringRef guard) {
  os << "/* Generated by linfuse-compile from " << inputFile
     << ". Do not edit.\n"
        " *\n"
        " * Each function takes and returns MLIR memref descriptors:\n"
        " * results first (through a pointer: one descriptor, or a struct of\n"
        " * them), then a pointer to each argument's descriptor. Inputs are\n"
        " * never written. Dynamic sizes come from the argument descriptors.\n"
     << (target == "cuda"
             ? " * Arguments and results are DEVICE buffers (mgpuMemAlloc and\n"
               " * mgpuMemcpy of liblinfuse_runtime, or any CUDA allocation).\n"
               " * A call returns with its results computed.\n"
             : "")
     << " * A result is a buffer the call allocated, or a strided view of\n"
        " * one: read it through its sizes and strides (the slices of a\n"
        " * merged GEMM's output are returned in place), and several\n"
        " * results may share one allocation (the same `allocated`).\n"
     << (!cudaGraph
             ? " * The caller owns the allocations: free each distinct one\n"
               " * once with\n"
             : " * The allocations are in the memory of the function's CUDA\n"
               " * graph, captured on the first call with given argument\n"
               " * buffers and shapes and replayed on later ones: valid until\n"
               " * the next call with the same arguments, whose launch frees\n"
               " * what is left of them. Copy them out, and free each\n"
               " * distinct one once when done (one left allocated when the\n"
               " * graph is dropped stays allocated) with\n")
     << (target == "cuda" ? " * mgpuMemFree(result.allocated, NULL).\n"
                          : " * free(result.allocated).\n")
     << " *\n"
        " * A function with a packing function (`<fn>__pack`) takes packed\n"
        " * weights: call <fn>__pack once on the weights, then pass its\n"
        " * results as <fn>'s trailing arguments on every call. A packed\n"
        " * result with the `allocated` pointer of a weight passed in is that\n"
        " * weight (one @fn reads unchanged) or, on the CPU, a view of "
        "weights\n"
        " * the caller laid out one after the other (a merged Q/K/V or "
        "gate/up\n"
        " * whose parts are adjacent: no copy is made): free only the others,\n"
        " * and keep the weights alive while the packed results are used.\n"
        " * Weights exported with their names (linfuse.torch.export_library:\n"
        " * a safetensors file) are bound with linfuse_bind_<fn>(weights, "
        "...),\n"
        " * weights = linfuse_weights_open(\"model.safetensors\").\n"
        " * Prefer linfuse_call_<fn>(same arguments) to _mlir_ciface_<fn>:\n"
        " * it checks the arguments' shapes against the signature and\n"
        " * returns an error code where the function's run-time checks fail\n"
        " * (sizes that do not fit together), where _mlir_ciface_<fn> would\n"
        " * print the failed check and abort the process. Other runtime\n"
        " * errors: linfuse_last_error() in linfuse/Runtime/Runtime.h\n"
        " * (liblinfuse_runtime.so). */\n\n"
     << "#ifndef " << guard << "\n#define " << guard << "\n\n"
     << "#include <stdint.h>\n"
     << (target == "cpu" ? "#include <stdlib.h>\n" : "")
     << "\n#ifdef __cplusplus\nextern \"C\" {\n#endif\n\n"
     << "/* From linfuse/Runtime/Runtime.h (liblinfuse_runtime.so). */\n"
        "int32_t linfuse_call(void (*fn)(void **), void **args);\n"
        "int32_t linfuse_check_argument_sizes(const char *function,\n"
        "                                     int32_t argument, int64_t rank,\n"
        "                                     const int64_t *sizes,\n"
        "                                     const int64_t *expected);\n"
        "void linfuse_clear_error(void);\n"
        "const char *linfuse_last_error_message(void);\n"
        "#ifndef LINFUSE_WEIGHTS_DECLARED\n"
        "#define LINFUSE_WEIGHTS_DECLARED\n"
        "typedef struct linfuse_weights linfuse_weights;\n"
        "#endif\n"
        "linfuse_weights *linfuse_weights_open(const char *path);\n"
        "int32_t linfuse_weights_bind(linfuse_weights *weights, const char "
        "*name,\n"
        "                             const char *dtype, int64_t rank,\n"
        "                             const int64_t *expected, void "
        "*descriptor);\n"
        "void linfuse_weights_close(linfuse_weights *weights);\n\n";
  llvm::StringSet<> declared;
  auto declare = [&](RankedTensorType t) {
    std::string name = descriptorName(t);
    if (!declared.insert(name).second)
      return;
    StringRef elt = *cElementType(t.getElementType());
    os << "#ifndef " << llvm::StringRef(name).upper() << "_DEFINED\n#define "
       << llvm::StringRef(name).upper() << "_DEFINED\ntypedef struct {\n  "
       << elt << " *allocated;\n  " << elt << " *aligned;\n  int64_t offset;\n";
    if (t.getRank() > 0)
      os << "  int64_t sizes[" << t.getRank() << "];\n  int64_t strides["
         << t.getRank() << "];\n";
    os << "} " << name << ";\n#endif\n\n";
  };
  for (const CFunction &fn : fns) {
    for (RankedTensorType t : fn.args)
      declare(t);
    for (RankedTensorType t : fn.results)
      declare(t);
  }
  for (const CFunction &fn : fns) {
    std::string resultParam = resultParameter(fn);
    if (fn.results.size() > 1) {
      os << "typedef struct {\n";
      for (auto [i, t] : llvm::enumerate(fn.results))
        os << "  " << descriptorName(t) << " r" << i << "; /* "
           << tensorString(t) << " */\n";
      os << "} " << fn.name << "_results;\n\n";
    }
    os << "/* @" << fn.name << "(";
    for (auto [i, t] : llvm::enumerate(fn.args))
      os << (i ? ", " : "") << tensorString(t);
    os << ") -> (";
    for (auto [i, t] : llvm::enumerate(fn.results))
      os << (i ? ", " : "") << tensorString(t);
    os << ") */\nvoid _mlir_ciface_" << fn.name << "(";
    bool first = true;
    if (!resultParam.empty()) {
      os << resultParam;
      first = false;
    }
    for (auto [i, t] : llvm::enumerate(fn.args)) {
      os << (first ? "" : ",") << "\n    " << descriptorName(t) << " *arg" << i;
      if (!fn.argNotes[i].empty())
        os << " /* " << fn.argNotes[i] << " */";
      first = false;
    }
    os << ");\n\n";
    writeCheckedCall(os, fn, resultParam);
    writeWeightBinder(os, fn);
  }
  if (target == "cpu")
    for (const CFunction &fn : fns)
      writeModelApi(os, fn, fns);
  os << "#ifdef __cplusplus\n}\n#endif\n\n#endif /* " << guard << " */\n";
}

static llvm::Error emitObject(ModuleOp module, StringRef path) {
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  DialectRegistry registry;
  registerBuiltinDialectTranslation(registry);
  registerLLVMDialectTranslation(registry);
  module.getContext()->appendDialectRegistry(registry);

  llvm::LLVMContext llvmContext;
  FirstErrorCollector errors(module.getContext());
  std::unique_ptr<llvm::Module> llvmModule =
      translateModuleToLLVMIR(module, llvmContext);
  if (!llvmModule)
    return errors.take("translation to LLVM IR failed");

  llvm::Triple triple(llvm::sys::getDefaultTargetTriple());
  std::string error;
  const llvm::Target *llvmTarget =
      llvm::TargetRegistry::lookupTarget(triple, error);
  if (!llvmTarget)
    return llvm::createStringError(llvm::inconvertibleErrorCode(), error);
  std::string cpu =
      mcpu == "native" ? llvm::sys::getHostCPUName().str() : mcpu.getValue();
  std::unique_ptr<llvm::TargetMachine> machine(llvmTarget->createTargetMachine(
      triple, cpu, "", llvm::TargetOptions(), llvm::Reloc::PIC_, std::nullopt,
      llvm::CodeGenOptLevel::Aggressive));
  if (!machine)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "no target machine for " + triple.str() +
                                       " cpu '" + cpu + "'");
  llvmModule->setTargetTriple(triple);
  llvmModule->setDataLayout(machine->createDataLayout());
  auto optimize = makeOptimizingTransformer(3, 0, machine.get());
  if (llvm::Error err = optimize(llvmModule.get()))
    return err;

  std::error_code ec;
  llvm::ToolOutputFile out(path, ec, llvm::sys::fs::OF_None);
  if (ec)
    return llvm::createStringError(ec, path + ": " + ec.message());
  llvm::legacy::PassManager pm;
  if (machine->addPassesToEmitFile(pm, out.os(), nullptr,
                                   llvm::CodeGenFileType::ObjectFile))
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "the target cannot emit object files");
  pm.run(*llvmModule);
  out.keep();
  return llvm::Error::success();
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  cl::HideUnrelatedOptions(category);
  cl::ParseCommandLineOptions(
      argc, argv,
      "linfuse-compile: ahead-of-time shared library from linalg-on-tensors\n\n"
      "  linfuse-compile model.mlir --target=cpu -o libmodel.so\n\n"
      "Writes libmodel.so (needs only liblinfuse_runtime.so at run time) and "
      "libmodel.h declaring _mlir_ciface_<fn> for each public function.\n");
  llvm::Expected<Target> targetKind = parseTarget(target);
  if (!targetKind)
    return fail(targetKind.takeError());

  // Where liblinfuse_runtime.so is: build/lib next to build/bin.
  std::string rtDir = runtimeDir;
  if (rtDir.empty()) {
    std::string exe = llvm::sys::fs::getMainExecutable(
        argv[0], reinterpret_cast<void *>(&main));
    llvm::SmallString<256> dir(
        llvm::sys::path::parent_path(llvm::sys::path::parent_path(exe)));
    llvm::sys::path::append(dir, "lib");
    rtDir = dir.str().str();
  }
  llvm::SmallString<256> rtLib(rtDir);
  llvm::sys::path::append(rtLib, "liblinfuse_runtime.so");
  if (!llvm::sys::fs::exists(rtLib))
    return fail(rtLib + ": No such file (use --runtime-dir)");

  DialectRegistry registry;
  registerToolDialects(registry);
  MLIRContext context(registry);
  context.loadAllAvailableDialects();
  auto module = loadModule(inputFile, context);
  if (!module)
    return fail(module.takeError());

  bool anyWeight = false;
  (**module).walk([&](func::FuncOp fn) {
    for (unsigned i = 0; i < fn.getNumArguments(); ++i)
      anyWeight |= static_cast<bool>(fn.getArgAttr(i, "linfuse.weight"));
  });
  if (!noOptimize)
    if (llvm::Error err = optimizeModule(**module, anyWeight, runtimeChecks))
      return fail(std::move(err));
  auto signatures = collectSignatures(**module);
  if (!signatures)
    return fail(signatures.takeError());
  if (signatures->empty())
    return fail(inputFile + ": no public function with a body");
  LowerOptions lowering;
  lowering.cudaGraph = cudaGraph;
  lowering.runtimeChecks = runtimeChecks;
  if (llvm::Error err = lowerModule(**module, *targetKind, nullptr, lowering))
    return fail(std::move(err));

  // Only the C interface is the library's API: an MLIR function named like
  // a C symbol (`@main`!) neither clashes with nor is interposed by the
  // program loading it.
  internalizeImplementation(**module);
  routeAssertionsToRuntime(**module);
  std::string object = outputFile + ".o";
  if (llvm::Error err = emitObject(**module, object))
    return fail(std::move(err));

  auto cc = llvm::sys::findProgramByName("cc");
  if (!cc)
    return fail("no C compiler driver 'cc' on PATH to link " + outputFile);
  std::string rpath = "-Wl,-rpath," + rtDir;
  std::string libDir = "-L" + rtDir;
  SmallVector<StringRef> linkArgs = {
      *cc,    "-shared",           "-o",  outputFile, object,
      libDir, "-llinfuse_runtime", rpath, "-lm"};
  std::string linkError;
  int rc = llvm::sys::ExecuteAndWait(*cc, linkArgs, std::nullopt, {}, 0, 0,
                                     &linkError);
  if (!keepObject)
    llvm::sys::fs::remove(object);
  if (rc != 0)
    return fail("linking " + outputFile + " failed" +
                (linkError.empty() ? "" : ": " + linkError));

  std::string header = headerFile;
  if (header.empty()) {
    llvm::SmallString<256> h(outputFile);
    llvm::sys::path::replace_extension(h, ".h");
    header = h.str().str();
  }
  std::error_code ec;
  llvm::raw_fd_ostream hos(header, ec);
  if (ec)
    return fail(header + ": " + ec.message());
  std::string guard =
      "LINFUSE_GENERATED_" + llvm::sys::path::stem(header).upper() + "_H";
  for (char &c : guard)
    if (!llvm::isAlnum(c))
      c = '_';
  writeHeader(hos, *signatures, guard);
  return 0;
}
