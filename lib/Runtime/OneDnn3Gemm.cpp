//===- OneDnn3Gemm.cpp - GEMMs on oneDNN 3's matmul -----------------------===//
//
// Debian's oneDNN 2.6 has no f16 matmul on the CPU, so f16 used to be
// widened to f32 for OpenBLAS on every call (555 us for 64x256x512, against
// 27 us for bf16). oneDNN 3 has one (brg:avx512_core_fp16 on AVX512-FP16
// CPUs, about f32's speed): PyPI's onednn-cpu-gomp 2023.2 (oneDNN 3.2,
// OpenMP on libgomp, the pool PyTorch and oneDNN 2 use), which
// `scripts/setup.sh --python` installs into the project venv.
//
// bf16 weights at M > 1 run here too: on weights reordered into its own
// layout, 3.2's AMX kernels take 0.79-0.83x of 2.6's time at M = 128 and
// 0.83x at M = 16 (hidden 4096, docs/Design.md). oneDNN 2 keeps f32 (level
// on both) and M = 1, where its gemm:jit kernels beat 3.2's brgemm.
//
// The few functions used are declared here against oneDNN 3's C ABI
// (stable across 3.x: handles, int enums, int64 dims) instead of compiled
// against its headers, which would clash with version 2's of the same
// names; so the build needs nothing, and any 3.x library serves. It is
// loaded on first use from $LINFUSE_DNNL3_LIBRARY, else `libdnnl.so.3` on
// the library path, else the venv's copy this build was configured with.
// Without it f16 keeps the widening path and bf16 stays on oneDNN 2.
//
//===----------------------------------------------------------------------===//

#include "OneDnnCommon.h"
#include "OneDnnGemm.h"

#include "linfuse/Runtime/Runtime.h"

#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

using namespace linfuse::runtime;

namespace {

/// oneDNN 3's C ABI, as far as it is used (values from its 3.2 headers).
namespace v3 {
struct Object;
using Handle = Object *; // engine, stream, descriptors, memory, primitives
using Status = int;      // dnnl_status_t
constexpr Status kSuccess = 0;
constexpr int kCpuEngine = 1;    // dnnl_cpu
constexpr unsigned kInOrder = 1; // dnnl_stream_in_order
constexpr int kF16 = 1, kBf16 = 2, kF32 = 3;
constexpr int kArgSrc = 1, kArgWeights = 33, kArgDst = 17, kArgBias = 41;
constexpr int kArgFrom = 1, kArgTo = 17; // reorders
constexpr int kTagAny = 1;               // dnnl_format_tag_any
constexpr int kQueryWeightsMd = 131;     // dnnl_query_weights_md
/// DNNL_MEMORY_ALLOCATE: the library allocates the buffer.
inline void *allocate() { return reinterpret_cast<void *>(~size_t(0)); }
constexpr int kRelu = 0x20, kGeluTanh = 0x2b, kSwish = 0x2c, kGeluErf = 0x31;
constexpr int kQueryImplInfoStr = 8; // dnnl_query_impl_info_str
// Memory descriptor queries (dnnl_query_t) and dnnl_blocked.
constexpr int kQueryStrides = 14, kQuerySubmemoryOffset = 259,
              kQueryFormatKind = 262;
constexpr int kFormatBlocked = 2;
constexpr int kBinaryAdd = 0x1fff0; // dnnl_binary_add
/// DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1: the first post-op's
/// second operand.
constexpr int kArgPostOp0Src1 = 32770;
struct ExecArg {
  int arg;
  Handle memory;
};

struct Api {
  Status (*engine_create)(Handle *, int kind, size_t index);
  Status (*stream_create)(Handle *, Handle engine, unsigned flags);
  Status (*stream_wait)(Handle);
  Status (*stream_destroy)(Handle);
  Status (*memory_desc_create_with_strides)(Handle *, int ndims,
                                            const int64_t *dims, int type,
                                            const int64_t *strides);
  Status (*memory_create)(Handle *, Handle desc, Handle engine, void *data);
  Status (*memory_destroy)(Handle);
  Status (*memory_get_data_handle)(Handle, void **);
  Status (*matmul_primitive_desc_create)(Handle *, Handle engine, Handle src,
                                         Handle weights, Handle bias,
                                         Handle dst, Handle attr);
  Status (*primitive_attr_create)(Handle *);
  Status (*primitive_attr_destroy)(Handle);
  Status (*primitive_attr_set_post_ops)(Handle attr, Handle ops);
  Status (*post_ops_create)(Handle *);
  Status (*post_ops_destroy)(Handle);
  Status (*post_ops_append_eltwise)(Handle ops, int alg, float alpha,
                                    float beta);
  Status (*post_ops_append_binary)(Handle ops, int alg, Handle src1);
  Status (*primitive_create)(Handle *, Handle desc);
  Status (*primitive_destroy)(Handle);
  Status (*primitive_desc_destroy)(Handle);
  Status (*primitive_desc_query)(Handle, int what, int index, void *result);
  Status (*primitive_execute)(Handle, Handle stream, int nargs,
                              const ExecArg *args);
  Status (*memory_desc_create_with_tag)(Handle *, int ndims,
                                        const int64_t *dims, int type, int tag);
  Handle (*primitive_desc_query_md)(Handle, int what, int index);
  Status (*memory_desc_clone)(Handle *, Handle);
  Status (*memory_desc_destroy)(Handle);
  Status (*memory_desc_create_submemory)(Handle *, Handle parent,
                                         const int64_t *dims,
                                         const int64_t *offsets);
  int (*memory_desc_equal)(Handle, Handle);
  Status (*memory_desc_query)(Handle, int what, void *result);
  size_t (*memory_desc_get_size)(Handle);
  Status (*reorder_primitive_desc_create)(Handle *, Handle src,
                                          Handle srcEngine, Handle dst,
                                          Handle dstEngine, Handle attr);
  OpenMp omp;
  Handle engine = nullptr;
};
} // namespace v3

#ifndef LINFUSE_DNNL3_DEFAULT_PATH
#define LINFUSE_DNNL3_DEFAULT_PATH ""
#endif

/// The library and its CPU engine, loaded once; null if either is missing.
const v3::Api *api() {
  static const v3::Api *instance = []() -> const v3::Api * {
    void *lib = openLibrary("LINFUSE_DNNL3_LIBRARY",
                            {"libdnnl.so.3", LINFUSE_DNNL3_DEFAULT_PATH});
    if (!lib)
      return nullptr;
    auto a = std::make_unique<v3::Api>();
    bool ok = true;
    auto load = [&](auto &slot, const char *name) {
      slot = reinterpret_cast<std::remove_reference_t<decltype(slot)>>(
          dlsym(lib, name));
      ok &= slot != nullptr;
    };
    load(a->engine_create, "dnnl_engine_create");
    load(a->stream_create, "dnnl_stream_create");
    load(a->stream_wait, "dnnl_stream_wait");
    load(a->stream_destroy, "dnnl_stream_destroy");
    load(a->memory_desc_create_with_strides,
         "dnnl_memory_desc_create_with_strides");
    load(a->memory_create, "dnnl_memory_create");
    load(a->memory_destroy, "dnnl_memory_destroy");
    load(a->memory_get_data_handle, "dnnl_memory_get_data_handle");
    load(a->matmul_primitive_desc_create, "dnnl_matmul_primitive_desc_create");
    load(a->primitive_attr_create, "dnnl_primitive_attr_create");
    load(a->primitive_attr_destroy, "dnnl_primitive_attr_destroy");
    load(a->primitive_attr_set_post_ops, "dnnl_primitive_attr_set_post_ops");
    load(a->post_ops_create, "dnnl_post_ops_create");
    load(a->post_ops_destroy, "dnnl_post_ops_destroy");
    load(a->post_ops_append_eltwise, "dnnl_post_ops_append_eltwise");
    load(a->post_ops_append_binary, "dnnl_post_ops_append_binary");
    load(a->primitive_create, "dnnl_primitive_create");
    load(a->primitive_destroy, "dnnl_primitive_destroy");
    load(a->primitive_desc_destroy, "dnnl_primitive_desc_destroy");
    load(a->primitive_desc_query, "dnnl_primitive_desc_query");
    load(a->primitive_execute, "dnnl_primitive_execute");
    load(a->memory_desc_create_with_tag, "dnnl_memory_desc_create_with_tag");
    load(a->primitive_desc_query_md, "dnnl_primitive_desc_query_md");
    load(a->memory_desc_clone, "dnnl_memory_desc_clone");
    load(a->memory_desc_destroy, "dnnl_memory_desc_destroy");
    load(a->memory_desc_create_submemory, "dnnl_memory_desc_create_submemory");
    load(a->memory_desc_equal, "dnnl_memory_desc_equal");
    load(a->memory_desc_query, "dnnl_memory_desc_query");
    load(a->memory_desc_get_size, "dnnl_memory_desc_get_size");
    load(a->reorder_primitive_desc_create,
         "dnnl_reorder_primitive_desc_create");
    if (!ok || a->engine_create(&a->engine, v3::kCpuEngine, 0) != v3::kSuccess)
      return nullptr;
    a->omp = OpenMp::of(lib);
    return a.release(); // lives as long as the process
  }();
  return instance;
}

int typeOf(int32_t dtype) {
  switch (dtype) {
  case LINFUSE_F16:
    return v3::kF16;
  case LINFUSE_BF16:
    return v3::kBf16;
  default:
    return v3::kF32;
  }
}

int eltwise(int32_t epilogue) {
  switch (epilogue) {
  case LINFUSE_EPILOGUE_RELU:
    return v3::kRelu;
  case LINFUSE_EPILOGUE_GELU_ERF:
    return v3::kGeluErf;
  case LINFUSE_EPILOGUE_GELU_TANH:
    return v3::kGeluTanh;
  case LINFUSE_EPILOGUE_SILU:
    return v3::kSwish; // x * sigmoid(alpha * x), alpha = 1
  default:
    return 0;
  }
}

struct Key {
  int32_t abType, cType, epilogue;
  bool hasBias;
  /// B is a weight read in oneDNN's layout (packsWeight), described in 2-d.
  bool packB;
  Operands ops;

  bool operator==(const Key &o) const {
    return std::memcmp(this, &o, sizeof(Key)) == 0;
  }
};

/// A primitive and the descriptors its arguments are created with; never
/// destroyed (the cache keeps them for the process, like oneDNN 2's).
struct Entry {
  v3::Handle primitive = nullptr; // null: no kernel for the problem
  v3::Handle a = nullptr, b = nullptr, c = nullptr, bias = nullptr;
  /// With Key::packB: B's layout as the primitive reads it, and the reorder
  /// into it (null when B is read as it is).
  v3::Handle packedB = nullptr, reorderB = nullptr;
  /// The bias is the matmul's own argument, not a binary post-op.
  bool matmulBias = false;
};

PrimitiveCache<Key, Entry> cache;

/// `l` in 3-d, or in 2-d without its batch dimension (`matrix`: oneDNN
/// chooses blocked weight layouts only for 2-d matmuls).
v3::Handle describe(const Layout &l, int32_t dtype, bool matrix) {
  int skip = matrix ? 1 : 0;
  v3::Handle md = nullptr;
  if (api()->memory_desc_create_with_strides(
          &md, 3 - skip, l.dims.data() + skip, typeOf(dtype),
          l.strides.data() + skip) != v3::kSuccess)
    return nullptr;
  return md;
}

/// The matmul's descriptor for `key` with `b` as B's layout; null where
/// oneDNN has none, or only its reference kernel. oneDNN answers problems
/// its optimized kernels do not cover (an f16 matmul bias; f16 weights
/// described `cab`) with the reference kernel, which took 400 ms for
/// 16x768x2304 (brgemm: 0.4 ms; widening for OpenBLAS: 3 ms): those are
/// left to the other paths.
v3::Handle describeMatmul(const Key &key, const Entry &e, v3::Handle b) {
  const v3::Api *d = api();
  v3::Handle attr = nullptr, ops = nullptr, pd = nullptr;
  bool ok = d->primitive_attr_create(&attr) == v3::kSuccess &&
            d->post_ops_create(&ops) == v3::kSuccess;
  if (ok && key.hasBias && !e.matmulBias)
    ok = d->post_ops_append_binary(ops, v3::kBinaryAdd, e.bias) == v3::kSuccess;
  if (ok && key.epilogue != LINFUSE_EPILOGUE_NONE)
    ok = d->post_ops_append_eltwise(
             ops, eltwise(key.epilogue),
             key.epilogue == LINFUSE_EPILOGUE_SILU ? 1.0f : 0.0f,
             0.0f) == v3::kSuccess;
  ok = ok && d->primitive_attr_set_post_ops(attr, ops) == v3::kSuccess;
  if (!ok || d->matmul_primitive_desc_create(&pd, d->engine, e.a, b,
                                             e.matmulBias ? e.bias : nullptr,
                                             e.c, attr) != v3::kSuccess)
    pd = nullptr;
  if (ops)
    d->post_ops_destroy(ops);
  if (attr)
    d->primitive_attr_destroy(attr);
  const char *impl = nullptr;
  if (pd && (d->primitive_desc_query(pd, v3::kQueryImplInfoStr, 0, &impl) !=
                 v3::kSuccess ||
             !impl || std::strncmp(impl, "ref", 3) == 0)) {
    d->primitive_desc_destroy(pd);
    pd = nullptr;
  }
  return pd;
}

/// With Key::packB: the primitive with B in the layout oneDNN prefers and
/// the reorder into it. False (nothing kept) if either is missing.
bool createPacked(const Key &key, Entry &e) {
  const v3::Api *d = api();
  int64_t dims[2] = {key.ops.b.dims[1], key.ops.b.dims[2]};
  v3::Handle any = nullptr;
  if (d->memory_desc_create_with_tag(&any, 2, dims, typeOf(key.abType),
                                     v3::kTagAny) != v3::kSuccess)
    return false;
  v3::Handle pd = nullptr;
  // Few rows: B's layout as kLayoutRows rows would have it, so that one
  // copy serves every M (OneDnnCommon.h).
  if (key.ops.a.dims[1] < kLayoutRows) {
    Key wide = key;
    wide.ops.a = withRows(key.ops.a, kLayoutRows);
    wide.ops.c = withRows(key.ops.c, kLayoutRows);
    Entry w = e;
    w.a = describe(wide.ops.a, key.abType, true);
    w.c = describe(wide.ops.c, key.cType, true);
    if (w.a && w.c)
      if (v3::Handle choice = describeMatmul(wide, w, any)) {
        if (v3::Handle chosen =
                d->primitive_desc_query_md(choice, v3::kQueryWeightsMd, 0))
          pd = describeMatmul(key, e, chosen);
        d->primitive_desc_destroy(choice);
      }
    for (v3::Handle md : {w.a, w.c})
      if (md)
        d->memory_desc_destroy(md);
  }
  if (!pd)
    pd = describeMatmul(key, e, any);
  d->memory_desc_destroy(any);
  if (!pd)
    return false;
  v3::Handle chosen = d->primitive_desc_query_md(pd, v3::kQueryWeightsMd, 0);
  bool ok = chosen &&
            d->memory_desc_clone(&e.packedB, chosen) == v3::kSuccess &&
            d->primitive_create(&e.primitive, pd) == v3::kSuccess;
  d->primitive_desc_destroy(pd);
  if (ok && !d->memory_desc_equal(e.packedB, e.b)) {
    v3::Handle rpd = nullptr;
    ok = d->reorder_primitive_desc_create(&rpd, e.b, d->engine, e.packedB,
                                          d->engine, nullptr) == v3::kSuccess &&
         d->primitive_create(&e.reorderB, rpd) == v3::kSuccess;
    if (rpd)
      d->primitive_desc_destroy(rpd);
  }
  if (!ok) {
    // Nothing half-made is kept: the plain primitive is tried next.
    for (v3::Handle *p : {&e.primitive, &e.reorderB})
      if (*p)
        d->primitive_destroy(*p);
    if (e.packedB)
      d->memory_desc_destroy(e.packedB);
    e.primitive = e.reorderB = e.packedB = nullptr;
  }
  return ok;
}

Entry create(const Key &key) {
  const v3::Api *d = api();
  Entry e;
  e.a = describe(key.ops.a, key.abType, key.packB);
  e.b = describe(key.ops.b, key.abType, key.packB);
  e.c = describe(key.ops.c, key.cType, key.packB);
  if (key.hasBias)
    e.bias = describe(key.ops.bias, key.cType, key.packB);
  if (!e.a || !e.b || !e.c || (key.hasBias && !e.bias))
    return e;
  // An f16 bias is added by a binary post-op: 3.2's brgemm kernels take no
  // f16 matmul bias (its reference kernel did), but do take an f16 binary
  // add, followed by the activation. f32 and bf16 take the matmul's own.
  e.matmulBias = key.hasBias && key.abType != LINFUSE_F16;
  if (key.packB && createPacked(key, e))
    return e;
  if (v3::Handle pd = describeMatmul(key, e, e.b)) {
    if (d->primitive_create(&e.primitive, pd) != v3::kSuccess)
      e.primitive = nullptr;
    d->primitive_desc_destroy(pd);
  }
  return e;
}

using Copies = PackedWeights<v3::Handle, v3::Handle>;
Copies packedWeights;

/// Reorders `from` (described by `fromDesc`) into a new memory of layout
/// `to` with `reorder`, or a reorder made here when that is null; null on
/// failure.
v3::Handle reorderInto(v3::Handle fromDesc, void *from, v3::Handle to,
                       v3::Handle reorder, v3::Handle s) {
  const v3::Api *d = api();
  v3::Handle made = nullptr;
  if (!reorder) {
    v3::Handle rpd = nullptr;
    if (d->reorder_primitive_desc_create(&rpd, fromDesc, d->engine, to,
                                         d->engine, nullptr) != v3::kSuccess)
      return nullptr;
    if (d->primitive_create(&made, rpd) != v3::kSuccess)
      made = nullptr;
    d->primitive_desc_destroy(rpd);
    if (!made)
      return nullptr;
    reorder = made;
  }
  v3::Handle src = nullptr, dst = nullptr;
  bool ok =
      d->memory_create(&src, fromDesc, d->engine, from) == v3::kSuccess &&
      d->memory_create(&dst, to, d->engine, v3::allocate()) == v3::kSuccess;
  if (ok) {
    v3::ExecArg args[2] = {{v3::kArgFrom, src}, {v3::kArgTo, dst}};
    ok = d->primitive_execute(reorder, s, 2, args) == v3::kSuccess &&
         d->stream_wait(s) == v3::kSuccess;
  }
  if (src)
    d->memory_destroy(src);
  if (made)
    d->primitive_destroy(made);
  if (!ok && dst) {
    d->memory_destroy(dst);
    dst = nullptr;
  }
  return dst;
}

/// oneDNN 3 for InPlace::reorder.
struct InPlaceApi {
  using Memory = v3::Handle;
  struct Reorder {
    v3::Handle from = nullptr, into = nullptr, primitive = nullptr;
    bool ok = false;
  };
  const v3::Api *d;
  v3::Handle s;
  const int64_t *strides(v3::Handle to) {
    int format = 0;
    const int64_t *strides = nullptr;
    if (d->memory_desc_query(to, v3::kQueryFormatKind, &format) !=
            v3::kSuccess ||
        format != v3::kFormatBlocked ||
        d->memory_desc_query(to, v3::kQueryStrides, &strides) != v3::kSuccess)
      return nullptr;
    return strides;
  }
  size_t bytes(v3::Handle to) { return d->memory_desc_get_size(to); }
  int64_t offset(v3::Handle to, const int64_t *part, const int64_t *offsets) {
    v3::Handle sub = nullptr;
    int64_t offset = -1;
    if (d->memory_desc_create_submemory(&sub, to, part, offsets) !=
            v3::kSuccess ||
        d->memory_desc_query(sub, v3::kQuerySubmemoryOffset, &offset) !=
            v3::kSuccess)
      offset = -1;
    if (sub)
      d->memory_desc_destroy(sub);
    return offset;
  }
  Reorder reorder(const int64_t *part, const int64_t *plainStrides,
                  v3::Handle to, int32_t type) {
    Reorder r;
    int64_t zero[2] = {0, 0};
    v3::Handle rpd = nullptr;
    r.ok =
        d->memory_desc_create_with_strides(&r.from, 2, part, typeOf(type),
                                           plainStrides) == v3::kSuccess &&
        d->memory_desc_create_submemory(&r.into, to, part, zero) ==
            v3::kSuccess &&
        d->reorder_primitive_desc_create(&rpd, r.from, d->engine, r.into,
                                         d->engine, nullptr) == v3::kSuccess &&
        d->primitive_create(&r.primitive, rpd) == v3::kSuccess;
    if (rpd)
      d->primitive_desc_destroy(rpd);
    return r;
  }
  bool run(Reorder &r, void *source, void *destination) {
    v3::Handle src = nullptr, dst = nullptr;
    bool ok =
        d->memory_create(&src, r.from, d->engine, source) == v3::kSuccess &&
        d->memory_create(&dst, r.into, d->engine, destination) == v3::kSuccess;
    v3::ExecArg args[2] = {{v3::kArgFrom, src}, {v3::kArgTo, dst}};
    ok = ok && d->primitive_execute(r.primitive, s, 2, args) == v3::kSuccess &&
         d->stream_wait(s) == v3::kSuccess;
    for (v3::Handle m : {src, dst})
      if (m)
        d->memory_destroy(m);
    return ok;
  }
  void destroy(Reorder &r) {
    if (r.primitive)
      d->primitive_destroy(r.primitive);
    for (v3::Handle md : {r.from, r.into})
      if (md)
        d->memory_desc_destroy(md);
  }
  v3::Handle wrap(v3::Handle to, void *data) {
    v3::Handle m = nullptr;
    return d->memory_create(&m, to, d->engine, data) == v3::kSuccess ? m
                                                                     : nullptr;
  }
};

/// A handed-over plain weight `data` (B as `b` describes it) reordered
/// into a new memory of layout `to` slice by slice (Slicing), each slice's
/// pages dropped once copied; null (nothing dropped) where slicing does not
/// apply or oneDNN has no reorder for a slice: the caller then reorders the
/// whole weight.
v3::Handle reorderInSlices(const Layout &b, int32_t type, void *data,
                           v3::Handle to, v3::Handle s) {
  const v3::Api *d = api();
  int64_t elt = dtypeBytes(type);
  Slicing slicing = Slicing::of(b, elt);
  if (!slicing.step)
    return nullptr;
  int64_t strides[2] = {b.strides[1], b.strides[2]};
  // Every slice's reorder first: a failure then leaves all values in place.
  struct Slice : Slicing::Piece {
    v3::Handle from = nullptr, into = nullptr, reorder = nullptr;
  };
  std::vector<Slice> slices;
  bool ok = true;
  for (const Slicing::Piece &piece : slicing.pieces(b, data)) {
    if (!ok)
      break;
    Slice slice;
    static_cast<Slicing::Piece &>(slice) = piece;
    v3::Handle rpd = nullptr;
    ok = d->memory_desc_create_with_strides(&slice.from, 2, slice.part,
                                            typeOf(type),
                                            strides) == v3::kSuccess &&
         d->memory_desc_create_submemory(&slice.into, to, slice.part,
                                         slice.offsets) == v3::kSuccess &&
         d->reorder_primitive_desc_create(&rpd, slice.from, d->engine,
                                          slice.into, d->engine,
                                          nullptr) == v3::kSuccess &&
         d->primitive_create(&slice.reorder, rpd) == v3::kSuccess;
    if (rpd)
      d->primitive_desc_destroy(rpd);
    slices.push_back(slice);
  }
  v3::Handle dst = nullptr;
  void *handle = nullptr;
  ok = ok &&
       d->memory_create(&dst, to, d->engine, v3::allocate()) == v3::kSuccess &&
       d->memory_get_data_handle(dst, &handle) == v3::kSuccess;
  for (Slice &slice : slices) {
    v3::Handle src = nullptr, sub = nullptr;
    if (ok) {
      ok =
          d->memory_create(&src, slice.from, d->engine, slice.source) ==
              v3::kSuccess &&
          d->memory_create(&sub, slice.into, d->engine, handle) == v3::kSuccess;
      v3::ExecArg args[2] = {{v3::kArgFrom, src}, {v3::kArgTo, sub}};
      ok = ok &&
           d->primitive_execute(slice.reorder, s, 2, args) == v3::kSuccess &&
           d->stream_wait(s) == v3::kSuccess;
      // Copied: these values are needed no more (the next slices' are).
      if (ok)
        reorderedFrom(slice.source, size_t(slice.bytes));
    }
    for (v3::Handle m : {src, sub})
      if (m)
        d->memory_destroy(m);
    if (slice.reorder)
      d->primitive_destroy(slice.reorder);
    for (v3::Handle md : {slice.from, slice.into})
      if (md)
        d->memory_desc_destroy(md);
  }
  if (!ok && dst) {
    d->memory_destroy(dst);
    dst = nullptr;
  }
  return dst;
}

/// B's values in `entry.packedB`'s layout (reordered once, from another
/// layout's copy where one exists), or null.
v3::Handle packedWeight(const Key &key, const Entry &entry, void *data,
                        v3::Handle s) {
  const v3::Api *d = api();
  auto same = [&](v3::Handle x, v3::Handle y) {
    return d->memory_desc_equal(x, y) != 0;
  };
  return packedWeights.find(
      data, key.ops.b, key.abType, entry.packedB, same,
      [&](const Copies::Copy *from) -> v3::Handle {
        if (!from && handedOver(data)) {
          bool changed = false;
          InPlaceApi inPlace{api(), s};
          if (v3::Handle m = InPlace::reorder(inPlace, key.ops.b, key.abType,
                                              data, entry.packedB, changed))
            return m;
          if (changed)
            return nullptr; // neither layout is whole: no copy
          if (v3::Handle m = reorderInSlices(key.ops.b, key.abType, data,
                                             entry.packedB, s))
            return m;
        }
        if (!from)
          return reorderInto(entry.b, data, entry.packedB, entry.reorderB, s);
        void *handle = nullptr;
        if (d->memory_get_data_handle(from->memory, &handle) != v3::kSuccess)
          return nullptr;
        return reorderInto(from->desc, handle, entry.packedB, nullptr, s);
      });
}

const Entry &lookup(const Key &key) { return cache.lookup(key, create); }

/// This thread's stream (streams are not thread-safe).
v3::Handle stream() {
  struct Owned {
    v3::Handle s = nullptr;
    ~Owned() {
      if (s)
        api()->stream_destroy(s);
    }
  };
  thread_local Owned owned;
  if (!owned.s && api()->stream_create(&owned.s, api()->engine, v3::kInOrder) !=
                      v3::kSuccess)
    owned.s = nullptr;
  return owned.s;
}

} // namespace

bool linfuse::runtime::oneDnn3Gemm(int32_t abType, int32_t cType,
                                   const GemmMatrix &a, bool transA,
                                   const GemmMatrix &b, bool transB,
                                   const GemmMatrix *bias, const GemmMatrix &c,
                                   int32_t epilogue, bool constantB) {
  const v3::Api *d = api();
  if (!d)
    return false;
  Key key;
  std::memset(&key, 0, sizeof(key));
  key.abType = abType;
  key.cType = cType;
  key.epilogue = epilogue;
  key.hasBias = bias != nullptr;
  // B as it is for M = 1 too: oneDNN 2's gemm:jit layout trick (`cab`)
  // sends 3.2 to its reference kernel.
  if (!describeOperands(a, transA, b, transB, bias, c, key.ops,
                        /*vectorKernel=*/false))
    return false;
  key.packB = packsWeight(key.ops, constantB);
  // bf16 comes here for its reordered weights only (oneDNN 2 reads plain
  // ones as fast, and faster at M = 1): the caller runs the rest there.
  if (abType == LINFUSE_BF16 && !key.packB)
    return false;
  ThreadScope threads(key.ops.threads, d->omp);
  const Entry &entry = lookup(key);
  v3::Handle s = stream();
  if (!entry.primitive || !s)
    return false;
  // Values handed over and dropped are read only through a copy.
  if (constantB && !entry.reorderB &&
      plainValuesGone(b.data, b.spanBytes(dtypeBytes(abType))))
    return false;
  v3::Handle packed = nullptr;
  if (entry.reorderB && !(packed = packedWeight(key, entry, b.data, s)))
    return false;
  v3::Handle mem[4] = {};
  v3::Handle mds[4] = {entry.a, entry.b, entry.c, entry.bias};
  void *data[4] = {a.data, b.data, c.data, bias ? bias->data : nullptr};
  int n = bias ? 4 : 3;
  bool ok = true;
  for (int i = 0; i < n && ok; ++i)
    if (i != 1 || !packed)
      ok =
          d->memory_create(&mem[i], mds[i], d->engine, data[i]) == v3::kSuccess;
  if (ok) {
    v3::ExecArg args[4] = {
        {v3::kArgSrc, mem[0]},
        {v3::kArgWeights, packed ? packed : mem[1]},
        {v3::kArgDst, mem[2]},
        {entry.matmulBias ? v3::kArgBias : v3::kArgPostOp0Src1, mem[3]}};
    ok = d->primitive_execute(entry.primitive, s, n, args) == v3::kSuccess &&
         d->stream_wait(s) == v3::kSuccess;
  }
  for (v3::Handle m : mem)
    if (m)
      d->memory_destroy(m);
  return ok;
}

void linfuse::runtime::releaseOneDnn3PackedWeights() {
  // Copies exist only once the library is loaded: nothing loads it here.
  packedWeights.clear([](v3::Handle m) { api()->memory_destroy(m); });
}

void linfuse::runtime::oneDnn3ReorderedSources(ByteRanges &out) {
  packedWeights.sources(out);
}

void linfuse::runtime::forgetOneDnn3Copies(uintptr_t begin, uintptr_t end,
                                           bool keepHandedOver) {
  packedWeights.forget(
      begin, end, [](v3::Handle m) { api()->memory_destroy(m); },
      keepHandedOver);
}
