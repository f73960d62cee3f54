// RUN: linfuse-opt %s -split-input-file --linfuse-convert-gemm-to-runtime | FileCheck %s
// RUN: linfuse-opt %s -split-input-file --linfuse-convert-gemm-to-runtime=target=cuda | FileCheck %s --check-prefix=CUDA
// RUN: linfuse-opt %s -split-input-file --linfuse-convert-gemm-to-runtime | %mlir-opt -split-input-file --verify-each -o /dev/null
// RUN: linfuse-opt %s -split-input-file --linfuse-convert-gemm-to-runtime=release-on-pack=false | FileCheck %s --check-prefix=KEEP

// Operands become unranked memrefs (a column slice of a wider buffer keeps
// its strides: the runtime reads them); flags = transpose_b (2) | bias (4)
// = 6, epilogue relu = 1, alpha 1, beta 0. One declaration per signature.
// CHECK-LABEL: func.func private @linfuse_cpu_gemm_f32_f32(memref<*xf32>, memref<*xf32>, memref<*xf32>, memref<*xf32>, i32, i32, f32, f32) -> i32
// CHECK-LABEL: func.func @linear_relu
// CHECK-SAME:    (%[[A:.*]]: memref<?x32xf32>, %[[B:.*]]: memref<64x32xf32>, %[[BIAS:.*]]: memref<64xf32>, %[[C:.*]]: memref<?x64xf32, strided<[192, 1], offset: ?>>)
// CHECK-DAG:     %[[UA:.*]] = memref.cast %[[A]] : memref<?x32xf32> to memref<*xf32>
// CHECK-DAG:     %[[UB:.*]] = memref.cast %[[B]] : memref<64x32xf32> to memref<*xf32>
// CHECK-DAG:     %[[UC:.*]] = memref.cast %[[C]] : memref<?x64xf32, strided<[192, 1], offset: ?>> to memref<*xf32>
// CHECK-DAG:     %[[UBIAS:.*]] = memref.cast %[[BIAS]] : memref<64xf32> to memref<*xf32>
// CHECK-DAG:     %[[FLAGS:.*]] = arith.constant 6 : i32
// CHECK-DAG:     %[[EPI:.*]] = arith.constant 1 : i32
// CHECK-DAG:     %[[ONE:.*]] = arith.constant 1.000000e+00 : f32
// CHECK-DAG:     %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK:         %{{.*}} = call @linfuse_cpu_gemm_f32_f32(%[[UA]], %[[UB]], %[[UBIAS]], %[[UC]], %[[FLAGS]], %[[EPI]], %[[ONE]], %[[ZERO]])
// CHECK-NOT:     linfuse.gemm
// CHECK-LABEL: func.func @second_call
// CHECK:         call @linfuse_cpu_gemm_f32_f32
// CUDA-LABEL: func.func private @linfuse_cuda_gemm_f32_f32(
// CUDA:         call @linfuse_cuda_gemm_f32_f32
func.func @linear_relu(%a: memref<?x32xf32>, %b: memref<64x32xf32>, %bias: memref<64xf32>, %c: memref<?x64xf32, strided<[192, 1], offset: ?>>) {
  linfuse.gemm ins(%a, %b : memref<?x32xf32>, memref<64x32xf32>) bias(%bias : memref<64xf32>) outs(%c : memref<?x64xf32, strided<[192, 1], offset: ?>>) transpose_b epilogue = <relu>
  return
}
func.func @second_call(%a: memref<4x8xf32>, %b: memref<8x8xf32>, %c: memref<4x8xf32>) {
  linfuse.gemm ins(%a, %b : memref<4x8xf32>, memref<8x8xf32>) outs(%c : memref<4x8xf32>)
  return
}

// -----

// f16 operands into f32 C; no bias, so C is passed in its place (flags =
// transpose_a = 1); gelu_tanh = 3; alpha and beta as given.
// CHECK-LABEL: func.func private @linfuse_cpu_gemm_f16_f32(memref<*xf16>, memref<*xf16>, memref<*xf32>, memref<*xf32>, i32, i32, f32, f32) -> i32
// CHECK-LABEL: func.func @mixed
// CHECK:         %[[UC:.*]] = memref.cast %{{.*}} : memref<4x16xf32> to memref<*xf32>
// CHECK-DAG:     %[[FLAGS:.*]] = arith.constant 1 : i32
// CHECK-DAG:     %[[EPI:.*]] = arith.constant 3 : i32
// CHECK-DAG:     %[[ALPHA:.*]] = arith.constant 2.500000e-01 : f32
// CHECK-DAG:     %[[BETA:.*]] = arith.constant 1.000000e+00 : f32
// CHECK:         call @linfuse_cpu_gemm_f16_f32(%{{.*}}, %{{.*}}, %[[UC]], %[[UC]], %[[FLAGS]], %[[EPI]], %[[ALPHA]], %[[BETA]])
func.func @mixed(%a: memref<8x4xf16>, %b: memref<8x16xf16>, %c: memref<4x16xf32>) {
  linfuse.gemm ins(%a, %b : memref<8x4xf16>, memref<8x16xf16>) outs(%c : memref<4x16xf32>) transpose_a epilogue = <gelu_tanh> {alpha = 0.25 : f32, beta = 1.0 : f32}
  return
}

// -----

// Batched bf16 with silu (4).
// CHECK-LABEL: func.func @batched_bf16
// CHECK:         call @linfuse_cpu_gemm_bf16_bf16(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) : (memref<*xbf16>, memref<*xbf16>, memref<*xbf16>, memref<*xbf16>, i32, i32, f32, f32) -> i32
func.func @batched_bf16(%a: memref<2x4x8xbf16>, %b: memref<2x8x16xbf16>, %c: memref<2x4x16xbf16>) {
  linfuse.gemm ins(%a, %b : memref<2x4x8xbf16>, memref<2x8x16xbf16>) outs(%c : memref<2x4x16xbf16>) epilogue = <silu>
  return
}

// -----

// B is a weight when it is a view of a packed weight (an argument that the
// packing function computed, `linfuse.packed`) or of a constant global:
// flags gain LINFUSE_GEMM_CONSTANT_B (8), so the host runtime reorders it
// once. The packing function first releases the reordered copies (its
// results may reuse the addresses of the ones it replaces).
// CHECK-LABEL: func.func private @linfuse_cpu_release_packed_weights()
// CHECK-LABEL: func.func @main__pack(
// CHECK-NEXT:    call @linfuse_cpu_release_packed_weights() : () -> ()
// CHECK-LABEL: func.func @main(
// CHECK:         %[[PACKED:.*]] = arith.constant 10 : i32
// CHECK:         call @linfuse_cpu_gemm_f32_f32(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[PACKED]],
// CHECK:         %[[GLOBAL:.*]] = arith.constant 8 : i32
// CHECK:         call @linfuse_cpu_gemm_f32_f32(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[GLOBAL]],
// CHECK:         %[[RAW:.*]] = arith.constant 2 : i32
// CHECK:         call @linfuse_cpu_gemm_f32_f32(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[RAW]],
// CHECK:         %[[ACT:.*]] = arith.constant 0 : i32
// CHECK:         call @linfuse_cpu_gemm_f32_f32(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[ACT]],
// CUDA-LABEL: func.func @main__pack(
// CUDA-NOT:     linfuse_cpu_release_packed_weights
// With release-on-pack=false (the JIT, which drops the copies of the
// ranges it packs itself) the packing function calls nothing, and the
// GEMMs still mark their weights constant:
// KEEP-NOT:     linfuse_cpu_release_packed_weights
// KEEP-LABEL:   func.func @main__pack(
// KEEP-NEXT:      return
// KEEP-LABEL:   func.func @main(
// KEEP:           %[[PACKED:.*]] = arith.constant 10 : i32
// KEEP:           call @linfuse_cpu_gemm_f32_f32(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[PACKED]],
memref.global "private" constant @w : memref<8x16xf32> = dense<1.0>
func.func @main__pack(%w: memref<64x8xf32>) -> memref<64x8xf32> {
  return %w : memref<64x8xf32>
}
func.func @main(%x: memref<4x8xf32>, %act: memref<8x16xf32>,
                %raw: memref<16x8xf32> {linfuse.weight},
                %packed: memref<64x8xf32> {linfuse.packed = 0 : i64},
                %c1: memref<4x32xf32>, %c2: memref<4x16xf32>,
                %c3: memref<4x16xf32>, %c4: memref<4x16xf32>)
    attributes {linfuse.pack_function = @main__pack} {
  // A column slice of the packed weight, used transposed.
  %slice = memref.subview %packed[0, 0] [32, 8] [1, 1] : memref<64x8xf32> to memref<32x8xf32, strided<[8, 1]>>
  linfuse.gemm ins(%x, %slice : memref<4x8xf32>, memref<32x8xf32, strided<[8, 1]>>) outs(%c1 : memref<4x32xf32>) transpose_b
  %g = memref.get_global @w : memref<8x16xf32>
  linfuse.gemm ins(%x, %g : memref<4x8xf32>, memref<8x16xf32>) outs(%c2 : memref<4x16xf32>)
  // Negative: an activation, and a weight argument a caller may change.
  linfuse.gemm ins(%x, %raw : memref<4x8xf32>, memref<16x8xf32>) outs(%c3 : memref<4x16xf32>) transpose_b
  linfuse.gemm ins(%x, %act : memref<4x8xf32>, memref<8x16xf32>) outs(%c4 : memref<4x16xf32>)
  return
}

// -----

// Packed weights read only as GEMM B operands (whole, or in disjoint static
// subviews, each in one orientation) are listed in `linfuse.gemm_only_weights`:
// a caller may give their plain values up once the runtime reads them from
// reordered copies. Negatives: one also copied out, one read as A, one read
// as B and as A by the same GEMM, overlapping subviews, one read transposed
// and as it is, one read by a batched GEMM.
// CHECK-LABEL: func.func @gemm_only(
// CHECK-SAME:    attributes {linfuse.gemm_only_weights = array<i64: 0, 4>, linfuse.pack_function = @gemm_only__pack}
// CUDA-LABEL:  func.func @gemm_only(
// CUDA-SAME:     attributes {linfuse.pack_function = @gemm_only__pack}
func.func @gemm_only__pack(%w: memref<8x8xf32>) -> memref<8x8xf32> {
  return %w : memref<8x8xf32>
}
func.func @gemm_only(%x: memref<8x8xf32>,
                     %p0: memref<16x8xf32> {linfuse.packed = 0 : i64},
                     %p1: memref<8x8xf32> {linfuse.packed = 1 : i64},
                     %p2: memref<8x8xf32> {linfuse.packed = 2 : i64},
                     %p3: memref<8x8xf32> {linfuse.packed = 3 : i64},
                     %p4: memref<8x8xf32> {linfuse.packed = 4 : i64},
                     %p5: memref<16x8xf32> {linfuse.packed = 5 : i64},
                     %p6: memref<8x8xf32> {linfuse.packed = 6 : i64},
                     %p7: memref<2x8x8xf32> {linfuse.packed = 7 : i64},
                     %c: memref<8x8xf32>, %out: memref<8x8xf32>,
                     %x3: memref<2x8x8xf32>, %c3: memref<2x8x8xf32>)
    attributes {linfuse.pack_function = @gemm_only__pack} {
  %s0 = memref.subview %p0[0, 0] [8, 8] [1, 1] : memref<16x8xf32> to memref<8x8xf32, strided<[8, 1]>>
  %s1 = memref.subview %p0[8, 0] [8, 8] [1, 1] : memref<16x8xf32> to memref<8x8xf32, strided<[8, 1], offset: 64>>
  linfuse.gemm ins(%x, %s0 : memref<8x8xf32>, memref<8x8xf32, strided<[8, 1]>>) outs(%c : memref<8x8xf32>) transpose_b
  linfuse.gemm ins(%x, %s1 : memref<8x8xf32>, memref<8x8xf32, strided<[8, 1], offset: 64>>) outs(%c : memref<8x8xf32>) transpose_b
  linfuse.gemm ins(%x, %p1 : memref<8x8xf32>, memref<8x8xf32>) outs(%c : memref<8x8xf32>)
  memref.copy %p1, %out : memref<8x8xf32> to memref<8x8xf32>
  linfuse.gemm ins(%p2, %x : memref<8x8xf32>, memref<8x8xf32>) outs(%c : memref<8x8xf32>)
  linfuse.gemm ins(%p3, %p3 : memref<8x8xf32>, memref<8x8xf32>) outs(%c : memref<8x8xf32>)
  linfuse.gemm ins(%x, %p4 : memref<8x8xf32>, memref<8x8xf32>) outs(%c : memref<8x8xf32>)
  linfuse.gemm ins(%x, %p4 : memref<8x8xf32>, memref<8x8xf32>) outs(%c : memref<8x8xf32>)
  %o0 = memref.subview %p5[0, 0] [8, 8] [1, 1] : memref<16x8xf32> to memref<8x8xf32, strided<[8, 1]>>
  %o1 = memref.subview %p5[4, 0] [8, 8] [1, 1] : memref<16x8xf32> to memref<8x8xf32, strided<[8, 1], offset: 32>>
  linfuse.gemm ins(%x, %o0 : memref<8x8xf32>, memref<8x8xf32, strided<[8, 1]>>) outs(%c : memref<8x8xf32>) transpose_b
  linfuse.gemm ins(%x, %o1 : memref<8x8xf32>, memref<8x8xf32, strided<[8, 1], offset: 32>>) outs(%c : memref<8x8xf32>) transpose_b
  linfuse.gemm ins(%x, %p6 : memref<8x8xf32>, memref<8x8xf32>) outs(%c : memref<8x8xf32>) transpose_b
  linfuse.gemm ins(%x, %p6 : memref<8x8xf32>, memref<8x8xf32>) outs(%c : memref<8x8xf32>)
  linfuse.gemm ins(%x3, %p7 : memref<2x8x8xf32>, memref<2x8x8xf32>) outs(%c3 : memref<2x8x8xf32>)
  return
}

// -----

// Without a packing function (nothing merged or folded) the weights the
// entry takes are its `linfuse.weight` arguments, numbered in order: %w0
// and %w2 are read only as GEMM B operands, %w1 also element-wise.
// Activations are not numbered.
// CHECK-LABEL: func.func @unpacked(
// CHECK-SAME:    attributes {linfuse.gemm_only_weights = array<i64: 0, 2>}
// CUDA-LABEL:  func.func @unpacked(
// CUDA-NOT:      linfuse.gemm_only_weights
func.func @unpacked(%x: memref<8x8xf32>,
                    %w0: memref<8x8xf32> {linfuse.weight},
                    %y: memref<8x8xf32>,
                    %w1: memref<8x8xf32> {linfuse.weight},
                    %w2: memref<8x8xf32> {linfuse.weight},
                    %c: memref<8x8xf32>, %out: memref<8x8xf32>) {
  linfuse.gemm ins(%x, %w0 : memref<8x8xf32>, memref<8x8xf32>) outs(%c : memref<8x8xf32>) transpose_b
  linfuse.gemm ins(%y, %w1 : memref<8x8xf32>, memref<8x8xf32>) outs(%c : memref<8x8xf32>)
  memref.copy %w1, %out : memref<8x8xf32> to memref<8x8xf32>
  linfuse.gemm ins(%x, %w2 : memref<8x8xf32>, memref<8x8xf32>) outs(%c : memref<8x8xf32>)
  return
}

// -----

// A function with packed weights numbers only those: its other
// `linfuse.weight`-marked arguments (none are left after lifting) would not
// be the entry's weights.
// CHECK-LABEL: func.func @packed_only(
// CHECK-SAME:    attributes {linfuse.gemm_only_weights = array<i64: 1>, linfuse.pack_function = @packed_only__pack}
func.func @packed_only__pack(%w: memref<8x8xf32>) -> memref<8x8xf32> {
  return %w : memref<8x8xf32>
}
func.func @packed_only(%x: memref<8x8xf32>,
                       %w: memref<8x8xf32> {linfuse.weight},
                       %p1: memref<8x8xf32> {linfuse.packed = 1 : i64},
                       %c: memref<8x8xf32>)
    attributes {linfuse.pack_function = @packed_only__pack} {
  linfuse.gemm ins(%x, %w : memref<8x8xf32>, memref<8x8xf32>) outs(%c : memref<8x8xf32>)
  linfuse.gemm ins(%x, %p1 : memref<8x8xf32>, memref<8x8xf32>) outs(%c : memref<8x8xf32>)
  return
}
