//===- OneDnnCommon.h - what both oneDNN GEMM paths share -*- C++ -*-===//
//
// Not installed. OneDnnGemm.cpp (oneDNN 2, Debian's) and OneDnn3Gemm.cpp
// (oneDNN 3, for f16, and bf16 weights at M > 1) describe operands, key
// their primitive and reordered-weight caches and set OpenMP's thread
// count the same way; nothing here names oneDNN's types, whose definitions
// differ between the two major versions.
//
//===----------------------------------------------------------------------===//

#ifndef LINFUSE_LIB_RUNTIME_ONEDNNCOMMON_H
#define LINFUSE_LIB_RUNTIME_ONEDNNCOMMON_H

#include "OneDnnGemm.h"
#include "RuntimeInternal.h"

#include <dlfcn.h>

#include <mutex>
#include <unordered_map>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

namespace linfuse::runtime {

/// GEMMs under this many flops run on the calling thread alone: waking
/// the pool costs more than it saves. Measured between PyTorch ops: a
/// Linear(8, 8) (128 flops) took 18 us on 2 threads and 5 us on one; a
/// 12-layer LLaMA MLP at M = 1 (0.7 MFLOP GEMMs) took 976 us with those
/// GEMMs on one thread and 652 us on 2.
constexpr double kSerialFlops = 1 << 16;

/// The thread count for GEMMs big enough to use several: the one
/// linfuse_set_num_threads chose, else $LINFUSE_NUM_THREADS, else OpenMP's
/// default.
int configuredThreads();

/// OpenMP's thread-count functions, found through a oneDNN library's own
/// dependencies (its libgomp); null where it runs on another runtime.
struct OpenMp {
  void (*setNumThreads)(int) = nullptr;
  int (*getMaxThreads)() = nullptr;
  // For linfuse_parallel_for: libgomp's entry point of `#pragma omp
  // parallel num_threads(n)` (also in LLVM's and Intel's OpenMP runtimes),
  // and who the calling thread is inside the region.
  void (*parallel)(void (*)(void *), void *, unsigned, unsigned) = nullptr;
  int (*threadNum)() = nullptr;
  int (*numThreads)() = nullptr;

  static OpenMp of(void *lib) {
    OpenMp omp;
    omp.setNumThreads =
        reinterpret_cast<void (*)(int)>(dlsym(lib, "omp_set_num_threads"));
    omp.getMaxThreads =
        reinterpret_cast<int (*)()>(dlsym(lib, "omp_get_max_threads"));
    omp.parallel =
        reinterpret_cast<void (*)(void (*)(void *), void *, unsigned,
                                  unsigned)>(dlsym(lib, "GOMP_parallel"));
    omp.threadNum =
        reinterpret_cast<int (*)()>(dlsym(lib, "omp_get_thread_num"));
    omp.numThreads =
        reinterpret_cast<int (*)()>(dlsym(lib, "omp_get_num_threads"));
    return omp;
  }
};

/// The OpenMP runtime of the host GEMM library (loading the library on
/// first use), null without one: the pool linfuse_parallel_for shares.
const OpenMp *hostOpenMp();

/// Makes OpenMP regions started by this thread use `n` threads while it
/// lives, then restores the caller's setting. The OpenMP runtime may be the
/// caller's too: PyTorch's wheel loads a libgomp.so.1 that oneDNN then
/// shares, and a thread count left behind changed torch.get_num_threads()
/// (and made Dynamo recompile every graph on its "num_threads" guard).
/// Without OpenMP functions nothing is done.
class ThreadScope {
public:
  ThreadScope(int n, const OpenMp &omp) : set(omp.setNumThreads) {
    if (!omp.setNumThreads || !omp.getMaxThreads)
      return;
    saved = omp.getMaxThreads();
    if (saved != n)
      set(n);
    else
      saved = 0;
  }
  ~ThreadScope() {
    if (saved > 0)
      set(saved);
  }
  ThreadScope(const ThreadScope &) = delete;
  ThreadScope &operator=(const ThreadScope &) = delete;

private:
  void (*set)(int);
  int saved = 0; // The caller's count, when it was changed.
};

/// One operand as the matmul sees it: dims and strides of a 3-d
/// (batch, rows, cols) tensor. A size-1 dimension's stride is never used
/// to address anything, so it is normalized (callers pass any value there,
/// and a primitive should not be compiled again for it).
struct Layout {
  std::array<int64_t, 3> dims, strides;

  /// `vectorKernel`: describe a single matrix the way that leads oneDNN
  /// 2.6 to its gemm:jit kernels rather than brgemm, which is faster for
  /// one row of output (M = 1, decode): a batch stride of the smaller of
  /// rows * row stride and cols * col stride, so that the matrix does not
  /// look like a dense 3-d array (with batch 1 the stride addresses
  /// nothing). Measured at hidden 4096, 2 threads: Q/K/V with B stored
  /// N x K 5.9 ms vs 8.9 ms; with B stored K x N (a plain x * W) 4.2 ms vs
  /// 11.5 ms in f32 and 1.9 ms vs 7.0 ms in bf16.
  static Layout of(const GemmMatrix &m, bool trans, bool vectorKernel = false) {
    Layout l;
    int64_t rows = trans ? m.cols : m.rows, cols = trans ? m.rows : m.cols;
    int64_t rs = trans ? m.colStride : m.rowStride;
    int64_t cs = trans ? m.rowStride : m.colStride;
    int64_t batch = m.batchStride == 0 ? 1 : m.batch;
    l.dims = {batch, rows, cols};
    l.strides = {m.batchStride, rs, cs};
    // Size-1 dimensions: strides that keep the descriptor dense-looking.
    if (cols == 1)
      l.strides[2] = 1;
    if (rows == 1)
      l.strides[1] = cols * l.strides[2];
    // One matrix: a batch stride past its whole extent, so that oneDNN
    // sees the plain layout it is (a transposed matrix is `acb`, not `cab`,
    // which would keep it off its brgemm kernels: 2.2x slower, measured).
    if (batch == 1)
      l.strides[0] = vectorKernel
                         ? std::min(rows * l.strides[1], cols * l.strides[2])
                         : std::max(rows * l.strides[1], cols * l.strides[2]);
    return l;
  }

  bool valid() const {
    for (int d = 0; d < 3; ++d)
      if (strides[d] <= 0)
        return false;
    return true;
  }
};

/// FNV-1a over a key's bytes (keys are zero-initialized, padding included,
/// before they are filled, and compared with memcmp).
template <typename T> struct BytesHash {
  size_t operator()(const T &k) const {
    const auto *p = reinterpret_cast<const unsigned char *>(&k);
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < sizeof(T); ++i)
      h = (h ^ p[i]) * 1099511628211ull;
    return size_t(h);
  }
};

/// Primitives by problem, shared by all threads: made by `create` on first
/// use, kept for the process (a model has few distinct problems per size,
/// and a primitive is small next to the weights it multiplies).
template <typename Key, typename Entry> class PrimitiveCache {
public:
  template <typename Create>
  const Entry &lookup(const Key &key, Create &&create) {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = entries.find(key);
    if (it == entries.end())
      it = entries.emplace(key, create(key)).first;
    return it->second;
  }

private:
  std::mutex mutex;
  std::unordered_map<Key, Entry, BytesHash<Key>> entries; // guarded by mutex
};

/// What both paths key a primitive on besides types and epilogue.
struct Operands {
  Layout a, b, c, bias;
  int32_t threads; // 1 under kSerialFlops, else configuredThreads()
};

/// Whether B, a weight (`constantB`: the same values at the same address
/// until linfuse_cpu_release_packed_weights), is read in the layout oneDNN
/// chooses: in a single (batch 1) product, with more than one row of
/// output unless the mode (linfuse_cpu_set_weight_reorder) is ALWAYS (at
/// M = 1 the plain layout reads fastest), and never in mode NEVER.
bool packsWeight(const Operands &ops, bool constantB);

/// Products with fewer rows than this choose B's reordered layout as if
/// they had this many: one copy then serves every size (oneDNN picks the
/// same layout for 1 to 128 rows on AVX-512, measured; where it would not,
/// the copy is reordered again, from the first one).
constexpr int64_t kLayoutRows = 16;

/// `l`, a dense row-major matrix of at least `rows` rows, for choosing B's
/// layout with kLayoutRows.
inline Layout withRows(const Layout &l, int64_t rows) {
  Layout r = l;
  r.dims[1] = std::max(rows, l.dims[1]);
  r.strides = {r.dims[1] * r.dims[2], r.dims[2], 1};
  return r;
}

/// How a handed-over weight is reordered from its plain values: in slices
/// of about kSliceBytes (each slice's reorder is a primitive of its own,
/// JIT-compiled: 2 MB slices cost 6.5 ms each, tripling the first call of
/// a LLaMA-7B layer), each slice's pages leaving memory as soon as it is
/// copied (so that the first call holds one weight's worth more than one
/// copy only a slice at a time, not a whole merged weight), along `dim` of
/// the 2-d B (0: its K rows, 1: its N columns), `step` at a time, a
/// multiple of 64 (oneDNN's blocks); `step` 0: in one piece (slices that
/// are not contiguous, or a weight of one slice).
struct Slicing {
  static constexpr int64_t kSliceBytes = 32 << 20;
  int dim = 0;
  int64_t step = 0;
  int64_t sliceBytes = 0; // one row (dim 0) or column (dim 1), in bytes

  /// Slices of about `target` bytes; a weight of one such slice: `step` 0,
  /// or with `whole`, one piece.
  static Slicing of(const Layout &b, int64_t elementBytes,
                    int64_t target = kSliceBytes, bool whole = false) {
    int64_t dims[2] = {b.dims[1], b.dims[2]};
    int64_t strides[2] = {b.strides[1], b.strides[2]};
    Slicing s;
    s.dim = strides[0] > strides[1] ? 0 : 1;
    int other = 1 - s.dim;
    if (b.dims[0] != 1 || strides[other] != 1 || strides[s.dim] != dims[other])
      return {};
    s.sliceBytes = dims[other] * elementBytes;
    s.step = std::max<int64_t>(64, target / s.sliceBytes / 64 * 64);
    if (s.step >= dims[s.dim]) {
      if (!whole || dims[s.dim] <= 0)
        return {};
      s.step = dims[s.dim];
    }
    return s;
  }

  /// One slice of the 2-d B at `data`: its sizes and offsets in B, and
  /// the bytes of the plain values it covers.
  struct Piece {
    int64_t part[2], offsets[2];
    char *source;
    int64_t bytes;
  };

  /// The slices of the 2-d B `b` at `data`, in order (`step` != 0).
  std::vector<Piece> pieces(const Layout &b, void *data) const {
    int64_t dims[2] = {b.dims[1], b.dims[2]};
    std::vector<Piece> out;
    for (int64_t at = 0; at < dims[dim]; at += step) {
      Piece p{{dims[0], dims[1]}, {0, 0}, nullptr, 0};
      p.part[dim] = std::min(step, dims[dim] - at);
      p.offsets[dim] = at;
      p.source = static_cast<char *>(data) + at * sliceBytes;
      p.bytes = p.part[dim] * sliceBytes;
      out.push_back(p);
    }
    return out;
  }
};

/// Reordering a handed-over weight over its own bytes: each slice of its
/// plain values is reordered into a scratch buffer small enough to stay in
/// cache and copied back over the same bytes, so the copy takes no memory
/// of its own and the first call touches no new pages (on the VMs measured
/// a page's first touch costs ~2 us: new memory fills at ~2 GB/s, which
/// made most of a 7B model's first call). It applies where oneDNN's layout
/// `to` lays every slice over exactly the bytes its plain values take: the
/// layout is as large as the dense plain weight (no padding) and its outer
/// stride along the sliced dimension is its largest (whole slices follow
/// one another), which each slice's offset in `to` then confirms. Each
/// slice goes through a submemory of `to` at offset 0 (a dense layout
/// sliced along its outermost dimension is the same at any block-aligned
/// offset): one reorder primitive serves every slice of the same size.
struct InPlace {
  static constexpr int64_t kSliceBytes = 2 << 20;

  /// The slicing, or one with `step` 0 where the plain weight is not dense.
  static Slicing slicing(const Layout &b, int64_t elementBytes) {
    return Slicing::of(b, elementBytes, kSliceBytes, /*whole=*/true);
  }

  /// Whether `to` (`toBytes` large, outer strides `toStrides` of the 2-d
  /// B's dimensions, in elements) lays each of `pieces` (slices of the
  /// dense B at `data`) at the same bytes: `offsetOf(piece)` is the
  /// element offset of the piece's submemory in `to`, or -1 if there is
  /// none.
  template <typename OffsetOf>
  static bool sameBytes(const Slicing &s,
                        const std::vector<Slicing::Piece> &pieces, void *data,
                        int64_t elementBytes, size_t toBytes,
                        const int64_t toStrides[2], OffsetOf &&offsetOf) {
    if (!s.step || pieces.empty() || toStrides[s.dim] <= toStrides[1 - s.dim])
      return false;
    int64_t plainBytes = 0;
    for (const Slicing::Piece &p : pieces)
      plainBytes += p.bytes;
    if (toBytes != size_t(plainBytes))
      return false;
    for (const Slicing::Piece &p : pieces) {
      int64_t offset = offsetOf(p);
      if (offset < 0 ||
          offset * elementBytes != p.source - static_cast<char *>(data))
        return false;
    }
    return true;
  }

  /// memcpy on the GEMMs' thread pool (linfuse_parallel_for), whose threads
  /// would otherwise spin idle while one thread copies each slice back.
  static void copyOnThePool(char *to, const char *from, int64_t bytes) {
    constexpr int64_t kChunk = 4096;
    struct Copy {
      char *to;
      const char *from;
      int64_t bytes;
    } copy{to, from, bytes};
    linfuse_parallel_for(
        [](int64_t lo, int64_t hi, void *context) {
          auto &c = *static_cast<Copy *>(context);
          int64_t begin = lo * kChunk, end = std::min(hi * kChunk, c.bytes);
          std::memcpy(c.to + begin, c.from + begin, size_t(end - begin));
        },
        &copy, (bytes + kChunk - 1) / kChunk, kChunk);
  }

  /// The bytes of the largest piece (the scratch buffer's size).
  static int64_t largest(const std::vector<Slicing::Piece> &pieces) {
    int64_t most = 0;
    for (const Slicing::Piece &p : pieces)
      most = std::max(most, p.bytes);
    return most;
  }

  /// The handed-over plain weight `data` (B as `b` describes it)
  /// reordered over its own bytes into layout `to`: a memory at `data`, or
  /// null where that does not apply or fails. `changed`: whether any bytes
  /// were written (a failure after that leaves neither layout whole).
  /// `Api` is either oneDNN's, providing
  ///   const int64_t *strides(to): a blocked layout's outer strides, or null;
  ///   size_t bytes(to);
  ///   int64_t offset(to, part, offsets): a submemory's offset in elements,
  ///     or -1;
  ///   Reorder reorder(part, plainStrides, to, type): a reorder from a
  ///     plain slice of sizes `part` into `to`'s slice at offset 0 (its
  ///     `ok` says whether it was made);
  ///   bool run(Reorder &, source, destination); void destroy(Reorder &);
  ///   Memory wrap(to, data): a memory object over `data`, or null.
  template <typename Api, typename Desc>
  static typename Api::Memory reorder(Api &api, const Layout &b, int32_t type,
                                      void *data, const Desc &to,
                                      bool &changed) {
    using Reorder = typename Api::Reorder;
    changed = false;
    int64_t elt = dtypeBytes(type);
    Slicing s = slicing(b, elt);
    if (!s.step)
      return {};
    std::vector<Slicing::Piece> pieces = s.pieces(b, data);
    const int64_t *toStrides = api.strides(to);
    size_t toBytes = api.bytes(to);
    auto offsetOf = [&](const Slicing::Piece &p) {
      return api.offset(to, p.part, p.offsets);
    };
    if (!toStrides || !mayOverwrite(data, toBytes) ||
        !sameBytes(s, pieces, data, elt, toBytes, toStrides, offsetOf))
      return {};
    // One reorder per slice size: all pieces but the last share one.
    int64_t plainStrides[2] = {b.strides[1], b.strides[2]};
    std::vector<std::pair<std::array<int64_t, 2>, Reorder>> reorders;
    auto reorderFor = [&](const Slicing::Piece &p) -> Reorder & {
      std::array<int64_t, 2> part = {p.part[0], p.part[1]};
      for (auto &[size, r] : reorders)
        if (size == part)
          return r;
      reorders.emplace_back(part, api.reorder(p.part, plainStrides, to, type));
      return reorders.back().second;
    };
    bool ok = true;
    for (const Slicing::Piece &p : pieces)
      ok = ok && reorderFor(p).ok;
    std::unique_ptr<char, decltype(&std::free)> scratch(
        static_cast<char *>(
            std::aligned_alloc(64, size_t(largest(pieces) + 63) / 64 * 64)),
        std::free);
    ok = ok && scratch;
    for (const Slicing::Piece &p : pieces) {
      if (!(ok = ok && api.run(reorderFor(p), p.source, scratch.get())))
        break;
      // The plain values are gone from the first write on: recorded
      // before it, so that a product reading them elsewhere (the other
      // oneDNN's cache) fails instead of reading a half-rewritten weight.
      if (!changed)
        overwritten(data, toBytes);
      changed = true;
      // This slice's plain values were read; the next slices' stay.
      copyOnThePool(p.source, scratch.get(), p.bytes);
    }
    for (auto &[size, r] : reorders)
      api.destroy(r);
    return ok ? api.wrap(to, data) : typename Api::Memory();
  }
};

/// Weights reordered into the layouts primitives read, by source address,
/// layout and type: made on first use, kept until `clear` (which
/// linfuse_cpu_release_packed_weights calls whenever an executable's weights
/// change or go away) except those handed over, kept until `forget`.
/// `Desc` is a oneDNN memory descriptor and `Memory` a memory object, of
/// either major version.
template <typename Desc, typename Memory> class PackedWeights {
public:
  /// The copy of `data` in layout `packed`: an existing one (`same`
  /// compares descriptors) or `make(from)`'s (null: nothing kept), where
  /// `from` is a copy of the weight in another layout to reorder from, or
  /// null to read `data` itself. Null too where `data` was handed over and
  /// no copy exists.
  template <typename Same, typename Make>
  Memory find(const void *data, const Layout &layout, int32_t type,
              const Desc &packed, Same &&same, Make &&make) {
    Key key = keyOf(data, layout, type);
    std::lock_guard<std::mutex> lock(mutex);
    std::vector<Copy> &copies = weights[key];
    for (const Copy &c : copies)
      if (same(c.desc, packed))
        return c.memory;
    // Another layout's copy is the source where there is one: the plain
    // values may be gone (handed over, or pages of a file released).
    size_t bytes = size_t(span(key) * dtypeBytes(type));
    bool fromPlain = copies.empty();
    if (fromPlain && plainValuesGone(data, bytes))
      return Memory();
    Memory memory = make(fromPlain ? nullptr : &copies.front());
    if (memory) {
      countWeightReorder();
      copies.push_back({packed, memory});
      // The copy is what GEMMs read now: the source's pages can leave
      // memory where they are a mapped weights file's (a one-row GEMM maps
      // them again) or were handed over.
      if (fromPlain)
        reorderedFrom(data, bytes);
    }
    return memory;
  }

  /// Whether `data` (B as `layout` describes it, of `type`) has a copy.
  bool has(const void *data, const Layout &layout, int32_t type) {
    Key key = keyOf(data, layout, type);
    std::lock_guard<std::mutex> lock(mutex);
    auto it = weights.find(key);
    return it != weights.end() && !it->second.empty();
  }

  /// Destroys every copy with `destroy(memory)`, except those of weights
  /// handed over (the only ones left).
  template <typename Destroy> void clear(Destroy &&destroy) {
    std::lock_guard<std::mutex> lock(mutex);
    for (auto it = weights.begin(); it != weights.end();) {
      if (handedOver(it->first.data)) {
        ++it;
        continue;
      }
      for (Copy &c : it->second)
        destroy(c.memory);
      it = weights.erase(it);
    }
  }

  /// Destroys the copies of weights that start in [begin, end) (with
  /// `keepHandedOver`, not those of handed-over weights, as clear()).
  template <typename Destroy>
  void forget(uintptr_t begin, uintptr_t end, Destroy &&destroy,
              bool keepHandedOver = false) {
    std::lock_guard<std::mutex> lock(mutex);
    for (auto it = weights.begin(); it != weights.end();) {
      auto p = reinterpret_cast<uintptr_t>(it->first.data);
      if (p < begin || p >= end ||
          (keepHandedOver && handedOver(it->first.data))) {
        ++it;
        continue;
      }
      for (Copy &c : it->second)
        destroy(c.memory);
      it = weights.erase(it);
    }
  }

  /// Appends the byte range of every weight with a copy.
  void sources(ByteRanges &out) {
    std::lock_guard<std::mutex> lock(mutex);
    for (const auto &[key, copies] : weights)
      if (!copies.empty()) {
        auto p = reinterpret_cast<uintptr_t>(key.data);
        out.push_back({p, p + uintptr_t(span(key) * dtypeBytes(key.type))});
      }
  }

  /// A copy: its layout and its memory.
  struct Copy {
    Desc desc;
    Memory memory;
  };

private:
  struct Key {
    const void *data;
    Layout layout;
    int32_t type;
    bool operator==(const Key &o) const {
      return std::memcmp(this, &o, sizeof(Key)) == 0;
    }
  };
  static Key keyOf(const void *data, const Layout &layout, int32_t type) {
    Key key;
    std::memset(&key, 0, sizeof(key));
    key.data = data;
    key.layout = layout;
    key.layout.strides[0] = 0; // a single matrix: no batch stride
    key.type = type;
    return key;
  }
  /// Elements from the first to one past the last (packed weights are
  /// single matrices).
  static int64_t span(const Key &k) {
    if (k.layout.dims[1] <= 0 || k.layout.dims[2] <= 0)
      return 0;
    return 1 + (k.layout.dims[1] - 1) * k.layout.strides[1] +
           (k.layout.dims[2] - 1) * k.layout.strides[2];
  }
  std::mutex mutex;
  /// Usually one layout per weight; a weight that problems of several
  /// sizes read in different blocked layouts has one copy per layout.
  std::unordered_map<Key, std::vector<Copy>, BytesHash<Key>> weights;
};

/// Fills `ops` for C = op(A) op(B) (+ bias); false where oneDNN is not to
/// be asked (nothing is read or written then): a strided bias, strides a
/// descriptor cannot hold, 2^40 elements or more.
/// `vectorKernel`: at M = 1, describe B the way that leads oneDNN 2 to its
/// gemm:jit kernels (Layout::of).
bool describeOperands(const GemmMatrix &a, bool transA, const GemmMatrix &b,
                      bool transB, const GemmMatrix *bias, const GemmMatrix &c,
                      Operands &ops, bool vectorKernel = true);

} // namespace linfuse::runtime

#endif // LINFUSE_LIB_RUNTIME_ONEDNNCOMMON_H
