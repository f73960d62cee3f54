//===- LinfuseModule.cpp - the `linfuse._linfuse` extension module --------===//
//
// Binds linfuse's C++ driver API (linfuse/Execution) for the `linfuse`
// package: optimize / lower / run pipelines on IR text with a report of what
// the passes did, and compile functions that are called on numpy arrays and
// DLPack tensors. The Python-facing API (and its documentation) is in
// python-bindings/linfuse/__init__.py; this module is its engine.
//
//===----------------------------------------------------------------------===//

#include "Arrays.h"

#include "linfuse/Execution/Executable.h"
#include "linfuse/Execution/Lowering.h"
#include "linfuse/Execution/ObjectCache.h"
#include "linfuse/Execution/PassReport.h"
#include "linfuse/InitAllLinfuse.h"
#include "linfuse/Runtime/Runtime.h"
#include "linfuse/Tools/ModuleLoading.h"
#include "linfuse/Tools/ToolContext.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/InitAllPasses.h"
#include "llvm/Support/ThreadPool.h"
#include "llvm/Support/raw_ostream.h"

#include <pybind11/stl.h>

#include <memory>
#include <mutex>

namespace py = pybind11;
using namespace mlir;
using namespace mlir::linfuse;
using namespace linfuse_python;

namespace {

/// The dialects every linfuse tool knows, registered once.
const DialectRegistry &registry() {
  static DialectRegistry *instance = [] {
    auto *r = new DialectRegistry();
    registerToolDialects(*r);
    return r;
  }();
  return *instance;
}

/// A fresh context per request (so large constants do not outlive it),
/// sharing one thread pool.
std::unique_ptr<MLIRContext> makeContext() {
  static llvm::DefaultThreadPool *pool = new llvm::DefaultThreadPool();
  auto ctx = std::make_unique<MLIRContext>(registry(),
                                           MLIRContext::Threading::DISABLED);
  ctx->setThreadPool(*pool);
  ctx->loadAllAvailableDialects();
  return ctx;
}

/// Value or linfuse.Error.
template <typename T> T check(llvm::Expected<T> value) {
  if (!value)
    raise(llvm::toString(value.takeError()));
  return std::move(*value);
}
void check(llvm::Error err) {
  if (err)
    raise(llvm::toString(std::move(err)));
}

OwningOpRef<ModuleOp> parse(MLIRContext &ctx, const std::string &ir) {
  return check(parseModule(ir, "<input>", ctx));
}

std::string print(ModuleOp module) {
  std::string text;
  llvm::raw_string_ostream os(text);
  module.print(os);
  return text;
}

/// Runs `transform` on the module parsed from `ir`; returns the resulting IR
/// and the report. The GIL is released while the passes run.
template <typename Fn>
std::pair<std::string, PassReport> transformText(const std::string &ir,
                                                 Fn transform) {
  auto ctx = makeContext();
  OwningOpRef<ModuleOp> module = parse(*ctx, ir);
  PassReport report;
  check(withoutGil([&] { return transform(*module, report); }));
  return {print(*module), std::move(report)};
}

/// A compiled function: the Executable and what compiling it reported.
struct CompiledFunction {
  /// What load_weights() read (numpy copies of non-contiguous arrays, DLPack
  /// tensors): the executable reads it on every call. Declared before `exe`
  /// so that it outlives it.
  std::unique_ptr<CallInputs> weights;
  std::unique_ptr<Executable> exe;
  PassReport report;
  std::string name;
};

std::vector<py::tuple> signature(llvm::ArrayRef<TensorSignature> types) {
  std::vector<py::tuple> out;
  for (const TensorSignature &t : types)
    out.push_back(py::make_tuple(t.str(), t.isWeight));
  return out;
}

void readInputs(const py::sequence &objects, CallInputs &inputs) {
  for (size_t i = 0; i < objects.size(); ++i)
    inputs.add(objects[i], i);
}

/// Calls `fn` with the GIL released.
template <typename Fn> auto withoutGil(Fn fn) {
  py::gil_scoped_release release;
  return fn();
}

} // namespace

PYBIND11_MODULE(_linfuse, m) {
  m.doc() = "linfuse's native engine; use the `linfuse` package.";
  static py::exception<std::runtime_error> error(m, "Error",
                                                 PyExc_RuntimeError);
  errorType = error;

  static std::once_flag passes;
  std::call_once(passes, [] {
    registerAllPasses();
    registerAllLinfusePasses();
  });

  py::class_<SourceLocation>(m, "SourceLocation")
      .def_readonly("name", &SourceLocation::name)
      .def_readonly("file", &SourceLocation::file)
      .def_readonly("line", &SourceLocation::line)
      .def_readonly("column", &SourceLocation::column)
      .def("__str__", &SourceLocation::str)
      .def("__repr__", [](const SourceLocation &l) {
        return "SourceLocation('" + l.str() + "')";
      });
  py::class_<Remark>(m, "Remark")
      .def_readonly("pass_name", &Remark::pass)
      .def_readonly("location", &Remark::location)
      .def_readonly("message", &Remark::message)
      .def("__str__",
           [](const Remark &r) {
             return r.location.str() + ": " + r.message + " [" + r.pass + "]";
           })
      .def("__repr__", [](const Remark &r) {
        return "Remark(" + r.pass + ", '" + r.message + "')";
      });
  py::class_<PassReport>(m, "PassReport")
      .def_readonly("remarks", &PassReport::remarks)
      .def_property_readonly("statistics", [](const PassReport &r) {
        std::vector<py::tuple> out;
        for (const PassStatisticValue &s : r.statistics)
          out.push_back(py::make_tuple(s.pass, s.name, s.value));
        return out;
      });

  m.def(
      "optimize",
      [](const std::string &ir, const std::string &options) {
        OptimizePipelineOptions parsed;
        std::string message;
        llvm::raw_string_ostream os(message);
        if (failed(parsed.parseFromString(options, os)))
          raise("bad --linfuse-optimize options '" + options + "': " +
                llvm::StringRef(message).trim().split('\n').first.str());
        return transformText(ir, [&](ModuleOp module, PassReport &report) {
          return optimizeModule(module, parsed, &report);
        });
      },
      py::arg("ir"), py::arg("options") = "");
  m.def(
      "lower",
      [](const std::string &ir, const std::string &target) {
        Target kind = check(parseTarget(target));
        return transformText(ir, [&](ModuleOp module, PassReport &report) {
          return lowerModule(module, kind, &report);
        });
      },
      py::arg("ir"), py::arg("target") = "cpu");
  m.def(
      "run_pipeline",
      [](const std::string &ir, const std::string &pipeline) {
        return transformText(ir, [&](ModuleOp module, PassReport &report) {
          return runPipeline(module, pipeline, &report);
        });
      },
      py::arg("ir"), py::arg("pipeline"));
  m.def(
      "public_functions",
      [](const std::string &ir) {
        auto ctx = makeContext();
        OwningOpRef<ModuleOp> module = parse(*ctx, ir);
        std::vector<std::string> names;
        for (auto fn : module->getOps<func::FuncOp>())
          if (fn.isPublic() && !fn.isExternal())
            names.push_back(fn.getName().str());
        return names;
      },
      py::arg("ir"));

  m.def(
      "structure",
      [](const std::string &ir) {
        // The IR as the compiler sees it: without locations and without the
        // weights' `linfuse.name`s, the only parts of a module that do not
        // change the code compiled from it.
        auto ctx = makeContext();
        OwningOpRef<ModuleOp> module = parse(*ctx, ir);
        module->walk([](func::FuncOp fn) {
          for (unsigned i = 0, e = fn.getNumArguments(); i < e; ++i)
            fn.removeArgAttr(i, "linfuse.name");
        });
        std::string text;
        llvm::raw_string_ostream os(text);
        module->print(os, OpPrintingFlags().enableDebugInfo(false));
        return text;
      },
      py::arg("ir"));

  m.def(
      "runtime_stats",
      [](bool reset) {
        linfuse_runtime_stats stats;
        linfuse_get_stats(&stats);
        if (reset)
          linfuse_reset_stats();
        py::dict out;
        out["gemm_calls"] = stats.gemm_calls;
        out["kernel_launches"] = stats.kernel_launches;
        out["fallback_gemm_calls"] = stats.fallback_gemm_calls;
        out["loop_calls"] = stats.loop_calls;
        out["threaded_loop_calls"] = stats.threaded_loop_calls;
        out["weight_reorders"] = stats.weight_reorders;
        out["mkl_gemm_calls"] = stats.mkl_gemm_calls;
        out["few_row_gemm_calls"] = stats.few_row_gemm_calls;
        return out;
      },
      py::arg("reset") = false);
  m.def(
      "set_num_threads", [](int32_t n) { return linfuse_set_num_threads(n); },
      py::arg("n"));
  m.def("get_num_threads", [] { return linfuse_get_num_threads(); });
  m.def(
      "set_weight_reorder",
      [](int32_t mode) {
        int32_t before = linfuse_cpu_set_weight_reorder(mode);
        if (before < 0)
          throw py::value_error("set_weight_reorder: mode must be 0 (never), "
                                "1 (above one row) or 2 (always), got " +
                                std::to_string(mode));
        return before;
      },
      py::arg("mode"));
  m.def("get_weight_reorder", [] { return linfuse_cpu_get_weight_reorder(); });
  m.def(
      "set_mkl",
      [](int32_t mode) {
        int32_t before = linfuse_cpu_set_mkl(mode);
        if (before < 0)
          throw py::value_error("set_mkl: mode must be 0 (never), 1 (auto) "
                                "or 2 (always), got " +
                                std::to_string(mode));
        return before;
      },
      py::arg("mode"));
  m.def("get_mkl", [] { return linfuse_cpu_get_mkl(); });
  m.def("mkl_available", [] { return linfuse_cpu_mkl_available() != 0; });
  m.def("cuda_enabled", [] {
#ifdef LINFUSE_ENABLE_CUDA
    return true;
#else
    return false;
#endif
  });

  // Attributes of its own (linfuse.torch keeps the memory of handed-over
  // weights there): pybind11 frees them after the C++ object, whose
  // executable makes the runtime forget those weights at its end.
  py::class_<CompiledFunction>(m, "CompiledFunction", py::dynamic_attr())
      .def(py::init([](const std::string &ir, const std::string &entry,
                       const std::string &target, bool optimize, bool cudaGraph,
                       bool runtimeChecks,
                       std::optional<std::string> objectCache) {
             CompileOptions options;
             options.objectCache =
                 objectCache ? *objectCache : defaultObjectCacheDirectory();
             options.target = check(parseTarget(target));
             options.optimize = optimize;
             options.lower.cudaGraph = cudaGraph;
             options.lower.runtimeChecks = runtimeChecks;
             auto fn = std::make_unique<CompiledFunction>();
             options.report = &fn->report;
             fn->name = entry;
             auto ctx = makeContext();
             OwningOpRef<ModuleOp> module = parse(*ctx, ir);
             fn->exe = check(withoutGil(
                 [&] { return Executable::compile(*module, entry, options); }));
             return fn;
           }),
           py::arg("ir"), py::arg("entry"), py::arg("target") = "cpu",
           py::arg("optimize") = true, py::arg("cuda_graph") = false,
           py::arg("runtime_checks") = true,
           py::arg("object_cache") = std::nullopt)
      .def(
          "instantiate",
          [](const CompiledFunction &f) {
            auto copy = std::make_unique<CompiledFunction>();
            copy->exe = check(f.exe->instantiate());
            copy->report = f.report;
            copy->name = f.name;
            return copy;
          },
          "The same compiled code with weights of its own (CPU only).")
      .def_readonly("name", &CompiledFunction::name)
      .def_readonly("report", &CompiledFunction::report)
      .def_property_readonly("arguments",
                             [](const CompiledFunction &f) {
                               return signature(f.exe->arguments());
                             })
      .def_property_readonly(
          "results",
          [](const CompiledFunction &f) { return signature(f.exe->results()); })
      .def_property_readonly(
          "has_pack_function",
          [](const CompiledFunction &f) { return f.exe->hasPackFunction(); })
      .def_property_readonly("concatenated_weights",
                             [](const CompiledFunction &f) {
                               py::list groups;
                               for (const std::vector<unsigned> &g :
                                    f.exe->concatenatedWeights())
                                 groups.append(py::cast(g));
                               return groups;
                             })
      .def(
          "hand_over_weights",
          [](CompiledFunction &f,
             const std::vector<std::pair<uintptr_t, size_t>> &within) {
            std::vector<std::pair<const void *, size_t>> ranges;
            for (auto [address, bytes] : within)
              ranges.push_back(
                  {reinterpret_cast<const void *>(address), bytes});
            py::list handed;
            for (auto [data, bytes] : f.exe->handOverWeights(ranges))
              handed.append(
                  py::make_tuple(reinterpret_cast<uintptr_t>(data), bytes));
            return handed;
          },
          py::arg("within"))
      .def_property_readonly(
          "weights_packed",
          [](const CompiledFunction &f) { return f.exe->hasPackedWeights(); })
      .def_property_readonly("target",
                             [](const CompiledFunction &f) {
                               return f.exe->target() == Target::CUDA ? "cuda"
                                                                      : "cpu";
                             })
      .def(
          "pack_weights",
          [](CompiledFunction &f, const py::sequence &weights) {
            auto inputs = std::make_unique<CallInputs>(f.exe->target());
            readInputs(weights, *inputs);
            check(withoutGil(
                [&] { return f.exe->packWeights(inputs->views()); }));
            // The executable now reads these (and no longer the old ones).
            f.weights = std::move(inputs);
          },
          py::arg("weights"))
      .def(
          "__call__",
          [](CompiledFunction &f, const py::sequence &args, uintptr_t stream,
             bool deviceResults) {
            CallInputs inputs(f.exe->target());
            readInputs(args, inputs);
            InvokeOptions options;
            options.stream = reinterpret_cast<void *>(stream);
            options.deviceResults = deviceResults;
            std::vector<ResultArray> results = check(withoutGil(
                [&] { return f.exe->invoke(inputs.views(), options); }));
            py::list out;
            for (ResultArray &r : results) {
              if (r.device)
                out.append(toDLPack(std::move(r)));
              else
                out.append(toNumpy(std::move(r)));
            }
            return out;
          },
          py::arg("args"), py::arg("stream") = 0,
          py::arg("device_results") = false,
          "Calls the function. CUDA target: `stream` is the caller's CUstream "
          "(the call waits for its work first), `device_results` keeps the "
          "results on the device (DLPack capsules) instead of numpy copies.");
}
