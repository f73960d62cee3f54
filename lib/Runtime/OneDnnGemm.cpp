//===- OneDnnGemm.cpp - the host GEMM on oneDNN's matmul ------------------===//
//
// oneDNN picks its kernels from the CPU's features at run time (AVX2,
// AVX-512, AVX512-BF16, AMX), so one build runs at library speed on the AMD
// EPYC and Intel Xeon machines alike; docs/Design.md has the measurements
// that chose it over OpenBLAS. bf16 is multiplied natively with f32
// accumulation (f16 on oneDNN 3: OneDnn3Gemm.cpp), and the bias and the
// activation run inside the matmul as its bias argument and an eltwise post-op.
//
// Through oneDNN's C API (the runtime does not use C++ exceptions). One
// primitive per problem (types, sizes, strides, transposes, epilogue): a
// primitive is JIT-compiled for its exact shapes, which is what makes it
// fast, so primitives are kept in a cache shared by all threads (executing
// one primitive from several threads at once is allowed). The engine is
// global; streams are per thread.
//
// Threads: Debian's oneDNN runs on OpenMP (libgomp), whose thread count is
// per calling thread. Each call sets it (when it differs) before the
// primitive is created and run, and restores the caller's after (the
// OpenMP runtime may be PyTorch's), and the count is part of the cache key (a
// primitive partitions its work for the count it was created with): the
// count linfuse_set_num_threads chose, or 1 for GEMMs too small to repay
// waking the pool (linfuse.torch follows torch.get_num_threads()).
//
//===----------------------------------------------------------------------===//

#include "OneDnnGemm.h"
#include "OneDnnCommon.h"
#include "RuntimeInternal.h"

#include <oneapi/dnnl/dnnl.h>

#include <dlfcn.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

using namespace linfuse::runtime;

namespace {

// The oneDNN functions used, resolved from the library at first use: the
// runtime does not link oneDNN, so it loads (and its CUDA backend runs)
// where oneDNN is not installed -- the GPU bundle does not carry its 40 MB
// (scripts/gpu-prepare.sh). Without it every call takes the OpenBLAS path.
#define LINFUSE_DNNL_FUNCTIONS(X)                                              \
  X(dnnl_engine_create)                                                        \
  X(dnnl_stream_create)                                                        \
  X(dnnl_stream_destroy)                                                       \
  X(dnnl_stream_wait)                                                          \
  X(dnnl_memory_desc_init_by_strides)                                          \
  X(dnnl_memory_create)                                                        \
  X(dnnl_memory_destroy)                                                       \
  X(dnnl_memory_get_data_handle)                                               \
  X(dnnl_matmul_desc_init)                                                     \
  X(dnnl_primitive_attr_create)                                                \
  X(dnnl_primitive_attr_destroy)                                               \
  X(dnnl_primitive_attr_set_post_ops)                                          \
  X(dnnl_post_ops_create)                                                      \
  X(dnnl_post_ops_destroy)                                                     \
  X(dnnl_post_ops_append_eltwise)                                              \
  X(dnnl_primitive_desc_create)                                                \
  X(dnnl_primitive_desc_destroy)                                               \
  X(dnnl_primitive_create)                                                     \
  X(dnnl_primitive_execute)                                                    \
  X(dnnl_primitive_destroy)                                                    \
  X(dnnl_memory_desc_init_by_tag)                                              \
  X(dnnl_memory_desc_init_submemory)                                           \
  X(dnnl_memory_desc_equal)                                                    \
  X(dnnl_memory_desc_get_size)                                                 \
  X(dnnl_primitive_desc_query_md)                                              \
  X(dnnl_reorder_primitive_desc_create)

struct Dnnl {
#define LINFUSE_DNNL_SLOT(name) decltype(&::name) name = nullptr;
  LINFUSE_DNNL_FUNCTIONS(LINFUSE_DNNL_SLOT)
#undef LINFUSE_DNNL_SLOT
  dnnl_engine_t engine = nullptr;
  OpenMp omp;
};

/// The library and the CPU engine, loaded once; null if either is missing
/// ($LINFUSE_DNNL_LIBRARY names another file than Debian's libdnnl.so.2).
const Dnnl *dnnl() {
  static const Dnnl *instance = []() -> const Dnnl * {
    void *lib = openLibrary("LINFUSE_DNNL_LIBRARY", {"libdnnl.so.2"});
    if (!lib)
      return nullptr;
    auto d = std::make_unique<Dnnl>();
#define LINFUSE_DNNL_LOAD(name)                                                \
  d->name = reinterpret_cast<decltype(&::name)>(dlsym(lib, #name));            \
  if (!d->name)                                                                \
    return nullptr;
    LINFUSE_DNNL_FUNCTIONS(LINFUSE_DNNL_LOAD)
#undef LINFUSE_DNNL_LOAD
    if (d->dnnl_engine_create(&d->engine, dnnl_cpu, 0) != dnnl_success)
      return nullptr;
    d->omp = OpenMp::of(lib);
    return d.release(); // lives as long as the process
  }();
  return instance;
}

dnnl_engine_t engine() { return dnnl() ? dnnl()->engine : nullptr; }

/// The thread count linfuse_set_num_threads chose (0: the default).
std::atomic<int> requestedThreads{0};

/// $LINFUSE_NUM_THREADS, else OpenMP's default (OMP_NUM_THREADS or every
/// core), read once.
int defaultThreads() {
  static const int n = [] {
    if (const char *env = std::getenv("LINFUSE_NUM_THREADS")) {
      char *end = nullptr;
      long v = std::strtol(env, &end, 10);
      if (end != env && *end == 0 && v > 0 && v <= 4096)
        return int(v);
    }
    if (dnnl() && dnnl()->omp.getMaxThreads)
      return std::max(1, dnnl()->omp.getMaxThreads());
    return 1;
  }();
  return n;
}

} // namespace

bool linfuse::runtime::packsWeight(const Operands &ops, bool constantB) {
  int32_t mode = weightReorder();
  return mode != LINFUSE_REORDER_NEVER && constantB &&
         (ops.a.dims[1] > 1 || mode == LINFUSE_REORDER_ALWAYS) &&
         ops.a.dims[0] == 1 && ops.b.dims[0] == 1 && ops.c.dims[0] == 1;
}

const OpenMp *linfuse::runtime::hostOpenMp() {
  return dnnl() ? &dnnl()->omp : nullptr;
}

int linfuse::runtime::configuredThreads() {
  int n = requestedThreads.load(std::memory_order_relaxed);
  return n > 0 ? n : defaultThreads();
}

bool linfuse::runtime::describeOperands(const GemmMatrix &a, bool transA,
                                        const GemmMatrix &b, bool transB,
                                        const GemmMatrix *bias,
                                        const GemmMatrix &c, Operands &ops,
                                        bool vectorKernel) {
  ops.a = Layout::of(a, transA);
  ops.b = Layout::of(b, transB,
                     /*vectorKernel=*/vectorKernel && ops.a.dims[1] == 1);
  ops.c = Layout::of(c, false);
  if (bias) {
    // The N bias values, broadcast over batch and rows. oneDNN 2.6 accepts
    // a strided bias descriptor but reads it densely (measured: wrong
    // sums), so only a dense bias is passed.
    if (bias->colStride != 1 && bias->cols > 1)
      return false;
    ops.bias.dims = {1, 1, bias->cols};
    ops.bias.strides = {bias->cols, bias->cols, 1};
  }
  if (!ops.a.valid() || !ops.b.valid() || !ops.c.valid() ||
      (bias && !ops.bias.valid()) || ops.c.dims[0] != c.batch)
    return false;
  // Problems no memory holds (2^40 elements and up) are left to the other
  // path, which says "out of memory" for its temporaries instead of having
  // oneDNN address them.
  constexpr int64_t kMaxElements = int64_t(1) << 40;
  for (const Layout *l : {&ops.a, &ops.b, &ops.c}) {
    int64_t elements = 1;
    for (int64_t d : l->dims)
      if (__builtin_mul_overflow(elements, d, &elements) ||
          elements >= kMaxElements)
        return false;
  }
  double flops = 2.0 * double(ops.a.dims[2]);
  for (int64_t d : ops.c.dims)
    flops *= double(d);
  ops.threads = flops < kSerialFlops ? 1 : configuredThreads();
  return true;
}

namespace {

/// This thread's stream (streams are not thread-safe).
dnnl_stream_t stream() {
  struct Owned {
    dnnl_stream_t s = nullptr;
    ~Owned() {
      if (s)
        dnnl()->dnnl_stream_destroy(s);
    }
  };
  thread_local Owned owned;
  if (!owned.s && engine())
    dnnl()->dnnl_stream_create(&owned.s, engine(), dnnl_stream_default_flags);
  return owned.s;
}

dnnl_data_type_t dnnlType(int32_t dtype) {
  switch (dtype) {
  case LINFUSE_F16:
    return dnnl_f16;
  case LINFUSE_BF16:
    return dnnl_bf16;
  case LINFUSE_I8:
    return dnnl_s8;
  case LINFUSE_I32:
    return dnnl_s32;
  default:
    return dnnl_f32;
  }
}

struct Key {
  int32_t abType, cType, epilogue;
  bool hasBias;
  /// B is a weight (the same values on every call until
  /// linfuse_cpu_release_packed_weights) in a single (batch 1) product:
  /// described in 2-d, with B's layout left to oneDNN.
  bool packB;
  Operands ops;

  bool operator==(const Key &o) const {
    return std::memcmp(this, &o, sizeof(Key)) == 0;
  }
};

struct Entry {
  dnnl_primitive_t primitive = nullptr; // null: oneDNN has no kernel
  dnnl_memory_desc_t a, b, c, bias;
  /// With Key::packB: B in the layout the primitive reads (oneDNN's
  /// blocked one), and the reorder from `b` into it; null reorder when the
  /// primitive reads `b` as it is.
  dnnl_memory_desc_t packedB;
  dnnl_primitive_t reorderB = nullptr;
};

PrimitiveCache<Key, Entry> cache;

/// `l` as a 3-d descriptor, or as a 2-d one without its batch dimension
/// (`matrix`: oneDNN chooses blocked weight layouts only for 2-d matmuls;
/// for 3-d ones `any` gives the plain layout).
bool describe(const Layout &l, int32_t dtype, dnnl_memory_desc_t &md,
              bool matrix = false) {
  dnnl_dims_t dims = {l.dims[0], l.dims[1], l.dims[2]};
  dnnl_dims_t strides = {l.strides[0], l.strides[1], l.strides[2]};
  int skip = matrix ? 1 : 0;
  return dnnl()->dnnl_memory_desc_init_by_strides(
             &md, 3 - skip, dims + skip, dnnlType(dtype), strides + skip) ==
         dnnl_success;
}

dnnl_alg_kind_t eltwise(int32_t epilogue) {
  switch (epilogue) {
  case LINFUSE_EPILOGUE_RELU:
    return dnnl_eltwise_relu;
  case LINFUSE_EPILOGUE_GELU_ERF:
    return dnnl_eltwise_gelu_erf;
  case LINFUSE_EPILOGUE_GELU_TANH:
    return dnnl_eltwise_gelu_tanh;
  case LINFUSE_EPILOGUE_SILU:
    return dnnl_eltwise_swish; // x * sigmoid(alpha * x), alpha = 1
  default:
    return dnnl_alg_kind_undef;
  }
}

/// The matmul primitive descriptor for `key`, with `b` as B's descriptor
/// (null if oneDNN has no implementation).
dnnl_primitive_desc_t describeMatmul(const Key &key, Entry &e,
                                     const dnnl_memory_desc_t &b) {
  dnnl_matmul_desc_t desc;
  if (dnnl()->dnnl_matmul_desc_init(&desc, &e.a, &b,
                                    key.hasBias ? &e.bias : nullptr,
                                    &e.c) != dnnl_success)
    return nullptr;
  dnnl_primitive_attr_t attr = nullptr;
  dnnl_post_ops_t ops = nullptr;
  bool ok = dnnl()->dnnl_primitive_attr_create(&attr) == dnnl_success;
  if (ok && key.epilogue != LINFUSE_EPILOGUE_NONE) {
    ok = dnnl()->dnnl_post_ops_create(&ops) == dnnl_success &&
         dnnl()->dnnl_post_ops_append_eltwise(
             ops, 1.0f, eltwise(key.epilogue),
             key.epilogue == LINFUSE_EPILOGUE_SILU ? 1.0f : 0.0f,
             0.0f) == dnnl_success &&
         dnnl()->dnnl_primitive_attr_set_post_ops(attr, ops) == dnnl_success;
  }
  dnnl_primitive_desc_t pd = nullptr;
  if (ok && dnnl()->dnnl_primitive_desc_create(&pd, &desc, attr, engine(),
                                               nullptr) != dnnl_success)
    pd = nullptr;
  if (ops)
    dnnl()->dnnl_post_ops_destroy(ops);
  if (attr)
    dnnl()->dnnl_primitive_attr_destroy(attr);
  return pd;
}

/// With Key::packB: the primitive with B in the layout oneDNN prefers, and
/// the reorder into it. False (nothing created) if either is missing.
bool createPacked(const Key &key, Entry &e) {
  dnnl_memory_desc_t any;
  dnnl_dims_t dims = {key.ops.b.dims[1], key.ops.b.dims[2]};
  if (dnnl()->dnnl_memory_desc_init_by_tag(&any, 2, dims, dnnlType(key.abType),
                                           dnnl_format_tag_any) != dnnl_success)
    return false;
  dnnl_primitive_desc_t pd = nullptr;
  // Few rows: B's layout as kLayoutRows rows would have it (at M = 1
  // oneDNN would read B as it is), so that one copy serves every M.
  if (key.ops.a.dims[1] < kLayoutRows) {
    Key wide = key;
    wide.ops.a = withRows(key.ops.a, kLayoutRows);
    wide.ops.c = withRows(key.ops.c, kLayoutRows);
    Entry w = e;
    if (describe(wide.ops.a, key.abType, w.a, true) &&
        describe(wide.ops.c, key.cType, w.c, true))
      if (dnnl_primitive_desc_t choice = describeMatmul(wide, w, any)) {
        const dnnl_memory_desc_t *chosen = dnnl()->dnnl_primitive_desc_query_md(
            choice, dnnl_query_weights_md, 0);
        if (chosen)
          pd = describeMatmul(key, e, *chosen);
        dnnl()->dnnl_primitive_desc_destroy(choice);
      }
  }
  if (!pd)
    pd = describeMatmul(key, e, any);
  if (!pd)
    return false;
  const dnnl_memory_desc_t *chosen =
      dnnl()->dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
  bool ok = chosen != nullptr;
  if (ok) {
    e.packedB = *chosen;
    ok = dnnl()->dnnl_primitive_create(&e.primitive, pd) == dnnl_success;
  }
  dnnl()->dnnl_primitive_desc_destroy(pd);
  if (!ok) {
    e.primitive = nullptr;
    return false;
  }
  if (dnnl()->dnnl_memory_desc_equal(&e.packedB, &e.b))
    return true; // B is read as it is
  dnnl_primitive_desc_t rpd = nullptr;
  ok = dnnl()->dnnl_reorder_primitive_desc_create(
           &rpd, &e.b, engine(), &e.packedB, engine(), nullptr) == dnnl_success;
  if (ok) {
    ok = dnnl()->dnnl_primitive_create(&e.reorderB, rpd) == dnnl_success;
    dnnl()->dnnl_primitive_desc_destroy(rpd);
  }
  if (!ok) {
    dnnl()->dnnl_primitive_destroy(e.primitive);
    e.primitive = e.reorderB = nullptr;
  }
  return ok;
}

/// Creates the primitive for `key` (entry.primitive stays null if oneDNN
/// has no implementation).
Entry create(const Key &key) {
  Entry e;
  bool matrix = key.packB;
  if (!engine() || !describe(key.ops.a, key.abType, e.a, matrix) ||
      !describe(key.ops.b, key.abType, e.b, matrix) ||
      !describe(key.ops.c, key.cType, e.c, matrix))
    return e;
  std::memset(&e.bias, 0, sizeof(e.bias));
  if (key.hasBias && !describe(key.ops.bias, key.cType, e.bias, matrix))
    return e;
  e.packedB = e.b;
  if (key.packB && createPacked(key, e))
    return e;
  if (dnnl_primitive_desc_t pd = describeMatmul(key, e, e.b)) {
    if (dnnl()->dnnl_primitive_create(&e.primitive, pd) != dnnl_success)
      e.primitive = nullptr;
    dnnl()->dnnl_primitive_desc_destroy(pd);
  }
  return e;
}

using Copies = PackedWeights<dnnl_memory_desc_t, dnnl_memory_t>;
Copies packedWeights;

/// Reorders `from` (described by `fromDesc`) into a new memory of layout
/// `to` with `reorder`, or a reorder made here when that is null; null on
/// failure.
dnnl_memory_t reorderInto(const dnnl_memory_desc_t &fromDesc, void *from,
                          const dnnl_memory_desc_t &to,
                          dnnl_primitive_t reorder, dnnl_stream_t s) {
  dnnl_primitive_t made = nullptr;
  if (!reorder) {
    dnnl_primitive_desc_t rpd = nullptr;
    if (dnnl()->dnnl_reorder_primitive_desc_create(
            &rpd, &fromDesc, engine(), &to, engine(), nullptr) != dnnl_success)
      return nullptr;
    if (dnnl()->dnnl_primitive_create(&made, rpd) != dnnl_success)
      made = nullptr;
    dnnl()->dnnl_primitive_desc_destroy(rpd);
    if (!made)
      return nullptr;
    reorder = made;
  }
  dnnl_memory_t src = nullptr, dst = nullptr;
  bool ok = dnnl()->dnnl_memory_create(&src, &fromDesc, engine(), from) ==
                dnnl_success &&
            dnnl()->dnnl_memory_create(&dst, &to, engine(),
                                       DNNL_MEMORY_ALLOCATE) == dnnl_success;
  if (ok) {
    dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, src}, {DNNL_ARG_TO, dst}};
    ok = dnnl()->dnnl_primitive_execute(reorder, s, 2, args) == dnnl_success &&
         dnnl()->dnnl_stream_wait(s) == dnnl_success;
  }
  if (src)
    dnnl()->dnnl_memory_destroy(src);
  if (made)
    dnnl()->dnnl_primitive_destroy(made);
  if (!ok && dst) {
    dnnl()->dnnl_memory_destroy(dst);
    dst = nullptr;
  }
  return dst;
}

/// oneDNN 2 for InPlace::reorder.
struct InPlaceApi {
  using Memory = dnnl_memory_t;
  struct Reorder {
    dnnl_memory_desc_t from, into;
    dnnl_primitive_t primitive = nullptr;
    bool ok = false;
  };
  dnnl_stream_t s;
  const int64_t *strides(const dnnl_memory_desc_t &to) {
    return to.format_kind == dnnl_blocked ? to.format_desc.blocking.strides
                                          : nullptr;
  }
  size_t bytes(const dnnl_memory_desc_t &to) {
    return dnnl()->dnnl_memory_desc_get_size(&to);
  }
  int64_t offset(const dnnl_memory_desc_t &to, const int64_t *part,
                 const int64_t *offsets) {
    dnnl_memory_desc_t sub;
    dnnl_dims_t dims = {part[0], part[1]}, at = {offsets[0], offsets[1]};
    return dnnl()->dnnl_memory_desc_init_submemory(&sub, &to, dims, at) ==
                   dnnl_success
               ? sub.offset0
               : -1;
  }
  Reorder reorder(const int64_t *part, const int64_t *plainStrides,
                  const dnnl_memory_desc_t &to, int32_t type) {
    Reorder r;
    dnnl_dims_t dims = {part[0], part[1]}, zero = {0, 0};
    dnnl_dims_t strides = {plainStrides[0], plainStrides[1]};
    dnnl_primitive_desc_t rpd = nullptr;
    r.ok = dnnl()->dnnl_memory_desc_init_by_strides(
               &r.from, 2, dims, dnnlType(type), strides) == dnnl_success &&
           dnnl()->dnnl_memory_desc_init_submemory(&r.into, &to, dims, zero) ==
               dnnl_success &&
           dnnl()->dnnl_reorder_primitive_desc_create(
               &rpd, &r.from, engine(), &r.into, engine(), nullptr) ==
               dnnl_success &&
           dnnl()->dnnl_primitive_create(&r.primitive, rpd) == dnnl_success;
    if (rpd)
      dnnl()->dnnl_primitive_desc_destroy(rpd);
    return r;
  }
  bool run(Reorder &r, void *source, void *destination) {
    dnnl_memory_t src = nullptr, dst = nullptr;
    bool ok = dnnl()->dnnl_memory_create(&src, &r.from, engine(), source) ==
                  dnnl_success &&
              dnnl()->dnnl_memory_create(&dst, &r.into, engine(),
                                         destination) == dnnl_success;
    dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, src}, {DNNL_ARG_TO, dst}};
    ok = ok &&
         dnnl()->dnnl_primitive_execute(r.primitive, s, 2, args) ==
             dnnl_success &&
         dnnl()->dnnl_stream_wait(s) == dnnl_success;
    for (dnnl_memory_t m : {src, dst})
      if (m)
        dnnl()->dnnl_memory_destroy(m);
    return ok;
  }
  void destroy(Reorder &r) {
    if (r.primitive)
      dnnl()->dnnl_primitive_destroy(r.primitive);
  }
  dnnl_memory_t wrap(const dnnl_memory_desc_t &to, void *data) {
    dnnl_memory_t m = nullptr;
    return dnnl()->dnnl_memory_create(&m, &to, engine(), data) == dnnl_success
               ? m
               : nullptr;
  }
};

/// A handed-over plain weight `data` (B as `b` describes it) reordered
/// into a new memory of layout `to` slice by slice (Slicing), each slice's
/// pages dropped once copied; null (nothing dropped) where slicing does not
/// apply or oneDNN has no reorder for a slice: the caller then reorders the
/// whole weight.
dnnl_memory_t reorderInSlices(const Layout &b, int32_t type, void *data,
                              const dnnl_memory_desc_t &to, dnnl_stream_t s) {
  int64_t elt = dtypeBytes(type);
  Slicing slicing = Slicing::of(b, elt);
  if (!slicing.step)
    return nullptr;
  dnnl_dims_t strides = {b.strides[1], b.strides[2]};
  // Every slice's reorder first: a failure then leaves all values in place.
  struct Slice : Slicing::Piece {
    dnnl_memory_desc_t from, into;
    dnnl_primitive_t reorder = nullptr;
  };
  std::vector<Slice> slices;
  bool ok = true;
  for (const Slicing::Piece &piece : slicing.pieces(b, data)) {
    if (!ok)
      break;
    Slice slice;
    static_cast<Slicing::Piece &>(slice) = piece;
    dnnl_primitive_desc_t rpd = nullptr;
    ok = dnnl()->dnnl_memory_desc_init_by_strides(&slice.from, 2, slice.part,
                                                  dnnlType(type),
                                                  strides) == dnnl_success &&
         dnnl()->dnnl_memory_desc_init_submemory(
             &slice.into, &to, slice.part, slice.offsets) == dnnl_success &&
         dnnl()->dnnl_reorder_primitive_desc_create(&rpd, &slice.from, engine(),
                                                    &slice.into, engine(),
                                                    nullptr) == dnnl_success &&
         dnnl()->dnnl_primitive_create(&slice.reorder, rpd) == dnnl_success;
    if (rpd)
      dnnl()->dnnl_primitive_desc_destroy(rpd);
    slices.push_back(slice);
  }
  dnnl_memory_t dst = nullptr;
  void *handle = nullptr;
  ok = ok &&
       dnnl()->dnnl_memory_create(&dst, &to, engine(), DNNL_MEMORY_ALLOCATE) ==
           dnnl_success &&
       dnnl()->dnnl_memory_get_data_handle(dst, &handle) == dnnl_success;
  for (Slice &slice : slices) {
    dnnl_memory_t src = nullptr, sub = nullptr;
    if (ok) {
      ok = dnnl()->dnnl_memory_create(&src, &slice.from, engine(),
                                      slice.source) == dnnl_success &&
           dnnl()->dnnl_memory_create(&sub, &slice.into, engine(), handle) ==
               dnnl_success;
      dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, src}, {DNNL_ARG_TO, sub}};
      ok = ok &&
           dnnl()->dnnl_primitive_execute(slice.reorder, s, 2, args) ==
               dnnl_success &&
           dnnl()->dnnl_stream_wait(s) == dnnl_success;
      // Copied: these values are needed no more (the next slices' are).
      if (ok)
        reorderedFrom(slice.source, size_t(slice.bytes));
    }
    for (dnnl_memory_t m : {src, sub})
      if (m)
        dnnl()->dnnl_memory_destroy(m);
    if (slice.reorder)
      dnnl()->dnnl_primitive_destroy(slice.reorder);
  }
  if (!ok && dst) {
    dnnl()->dnnl_memory_destroy(dst);
    dst = nullptr;
  }
  return dst;
}

/// B's values in `entry.packedB`'s layout (reordered once, from another
/// layout's copy where one exists), or null.
dnnl_memory_t packedWeight(const Key &key, const Entry &entry, void *data,
                           dnnl_stream_t s) {
  auto same = [](const dnnl_memory_desc_t &x, const dnnl_memory_desc_t &y) {
    return dnnl()->dnnl_memory_desc_equal(&x, &y) != 0;
  };
  return packedWeights.find(
      data, key.ops.b, key.abType, entry.packedB, same,
      [&](const Copies::Copy *from) -> dnnl_memory_t {
        if (!from && handedOver(data)) {
          bool changed = false;
          InPlaceApi inPlace{s};
          if (dnnl_memory_t m = InPlace::reorder(inPlace, key.ops.b, key.abType,
                                                 data, entry.packedB, changed))
            return m;
          if (changed)
            return nullptr; // neither layout is whole: no copy
          if (dnnl_memory_t m = reorderInSlices(key.ops.b, key.abType, data,
                                                entry.packedB, s))
            return m;
        }
        if (!from)
          return reorderInto(entry.b, data, entry.packedB, entry.reorderB, s);
        void *handle = nullptr;
        if (dnnl()->dnnl_memory_get_data_handle(from->memory, &handle) !=
            dnnl_success)
          return nullptr;
        return reorderInto(from->desc, handle, entry.packedB, nullptr, s);
      });
}

const Entry &lookup(const Key &key) { return cache.lookup(key, create); }

} // namespace

bool linfuse::runtime::oneDnnGemm(int32_t abType, int32_t cType,
                                  const GemmMatrix &a, bool transA,
                                  const GemmMatrix &b, bool transB,
                                  const GemmMatrix *bias, const GemmMatrix &c,
                                  int32_t epilogue, bool constantB) {
  // Without oneDNN every product takes the OpenBLAS path.
  if (!dnnl())
    return false;
  Key key;
  std::memset(&key, 0, sizeof(key));
  key.abType = abType;
  key.cType = cType;
  key.epilogue = epilogue;
  key.hasBias = bias != nullptr;
  if (!describeOperands(a, transA, b, transB, bias, c, key.ops))
    return false;
  // One row of output (decode) runs fastest on gemm:jit with B as it is.
  key.packB = packsWeight(key.ops, constantB);
  ThreadScope threads(key.ops.threads, dnnl()->omp);
  const Entry &entry = lookup(key);
  dnnl_stream_t s = stream();
  if (!entry.primitive || !s)
    return false;

  // Values handed over and dropped are read only through a copy.
  if (constantB && !entry.reorderB &&
      plainValuesGone(b.data, b.spanBytes(dtypeBytes(abType))))
    return false;
  dnnl_memory_t packed = nullptr;
  if (entry.reorderB && !(packed = packedWeight(key, entry, b.data, s)))
    return false;
  dnnl_memory_t mem[4] = {};
  const dnnl_memory_desc_t *mds[4] = {&entry.a, &entry.b, &entry.c,
                                      &entry.bias};
  void *data[4] = {a.data, b.data, c.data, bias ? bias->data : nullptr};
  int n = bias ? 4 : 3;
  bool ok = true;
  for (int i = 0; i < n && ok; ++i)
    if (i != 1 || !packed)
      ok = dnnl()->dnnl_memory_create(&mem[i], mds[i], engine(), data[i]) ==
           dnnl_success;
  if (ok) {
    dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, mem[0]},
                               {DNNL_ARG_WEIGHTS, packed ? packed : mem[1]},
                               {DNNL_ARG_DST, mem[2]},
                               {DNNL_ARG_BIAS, mem[3]}};
    ok = dnnl()->dnnl_primitive_execute(entry.primitive, s, n, args) ==
             dnnl_success &&
         dnnl()->dnnl_stream_wait(s) == dnnl_success;
  }
  for (dnnl_memory_t m : mem)
    if (m)
      dnnl()->dnnl_memory_destroy(m);
  return ok;
}

int32_t linfuse_set_num_threads(int32_t n) {
  requestedThreads.store(n > 0 ? n : 0, std::memory_order_relaxed);
  int32_t now = configuredThreads();
  setBlasThreads(now);
  return now;
}

int32_t linfuse_get_num_threads(void) { return configuredThreads(); }

void linfuse_cpu_release_packed_weights(void) {
  releaseMklPackedWeights();
  releaseOneDnn3PackedWeights();
  releaseWidenedWeights();
  if (dnnl())
    packedWeights.clear(
        [](dnnl_memory_t m) { dnnl()->dnnl_memory_destroy(m); });
}

void linfuse_cpu_release_packed_weights_in(const void *data, int64_t bytes) {
  if (!data || bytes <= 0)
    return;
  auto begin = reinterpret_cast<uintptr_t>(data);
  uintptr_t end = begin + uintptr_t(bytes);
  forgetMklCopies(begin, end, /*keepHandedOver=*/true);
  forgetOneDnn3Copies(begin, end, /*keepHandedOver=*/true);
  releaseWidenedWeights(begin, end);
  forgetOneDnnCopies(begin, end, /*keepHandedOver=*/true);
}

void linfuse::runtime::oneDnnReorderedSources(ByteRanges &out) {
  packedWeights.sources(out);
}

void linfuse::runtime::forgetOneDnnCopies(uintptr_t begin, uintptr_t end,
                                          bool keepHandedOver) {
  if (dnnl())
    packedWeights.forget(
        begin, end, [](dnnl_memory_t m) { dnnl()->dnnl_memory_destroy(m); },
        keepHandedOver);
}
