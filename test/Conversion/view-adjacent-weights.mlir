// RUN: linfuse-opt %s --linfuse-view-adjacent-weights --split-input-file | FileCheck %s

// Gate and up copied into the rows of one buffer: the packed result is the
// gate weight viewed as both when up starts where gate ends (96 rows of
// 64 f32 = 24576 bytes) and gate's descriptor offset is 0; else the copy,
// unchanged, inside the else branch. The weight returned as is stays.
// CHECK-LABEL: func.func @f__pack(
// CHECK-SAME:      %[[G:[a-z0-9]+]]: memref<96x64xf32> {linfuse.weight}, %[[U:[a-z0-9]+]]: memref<96x64xf32> {linfuse.weight}, %[[D:[a-z0-9]+]]: memref<64x96xf32> {linfuse.weight})
// CHECK:         %{{.*}}, %[[GOFF:.*]], %{{.*}}:2, %{{.*}}:2 = memref.extract_strided_metadata %[[G]]
// CHECK-NEXT:    %[[GPTR:.*]] = memref.extract_aligned_pointer_as_index %[[G]]
// CHECK-NEXT:    %[[C4:.*]] = arith.constant 4 : index
// CHECK-NEXT:    %[[GB:.*]] = arith.muli %[[GOFF]], %[[C4]] : index
// CHECK-NEXT:    %[[GADDR:.*]] = arith.addi %[[GPTR]], %[[GB]] : index
// CHECK-NEXT:    %[[C0:.*]] = arith.constant 0 : index
// CHECK-NEXT:    %[[ZERO:.*]] = arith.cmpi eq, %[[GOFF]], %[[C0]] : index
// CHECK-NEXT:    %{{.*}}, %[[UOFF:.*]], %{{.*}}:2, %{{.*}}:2 = memref.extract_strided_metadata %[[U]]
// CHECK-NEXT:    %[[UPTR:.*]] = memref.extract_aligned_pointer_as_index %[[U]]
// CHECK-NEXT:    %[[C4B:.*]] = arith.constant 4 : index
// CHECK-NEXT:    %[[UB:.*]] = arith.muli %[[UOFF]], %[[C4B]] : index
// CHECK-NEXT:    %[[UADDR:.*]] = arith.addi %[[UPTR]], %[[UB]] : index
// CHECK-NEXT:    %[[ROWS:.*]] = arith.constant 24576 : index
// CHECK-NEXT:    %[[WANT:.*]] = arith.addi %[[GADDR]], %[[ROWS]] : index
// CHECK-NEXT:    %[[NEXT:.*]] = arith.cmpi eq, %[[UADDR]], %[[WANT]] : index
// CHECK-NEXT:    %[[ADJ:.*]] = arith.andi %[[ZERO]], %[[NEXT]] : i1
// CHECK-NEXT:    %[[R:.*]] = scf.if %[[ADJ]] -> (memref<192x64xf32>) {
// CHECK-NEXT:      %[[VIEW:.*]] = memref.reinterpret_cast %[[G]] to offset: [0], sizes: [192, 64], strides: [64, 1] : memref<96x64xf32> to memref<192x64xf32>
// CHECK-NEXT:      scf.yield %[[VIEW]] : memref<192x64xf32>
// CHECK-NEXT:    } else {
// CHECK-NEXT:      %[[A:.*]] = memref.alloc() {alignment = 64 : i64} : memref<192x64xf32>
// CHECK-NEXT:      %[[S0:.*]] = memref.subview %[[A]][0, 0] [96, 64] [1, 1]
// CHECK-NEXT:      memref.copy %[[G]], %[[S0]]
// CHECK-NEXT:      %[[S1:.*]] = memref.subview %[[A]][96, 0] [96, 64] [1, 1]
// CHECK-NEXT:      memref.copy %[[U]], %[[S1]]
// CHECK-NEXT:      scf.yield %[[A]] : memref<192x64xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    return %[[R]], %[[D]] : memref<192x64xf32>, memref<64x96xf32>
func.func @f__pack(%g: memref<96x64xf32> {linfuse.weight}, %u: memref<96x64xf32> {linfuse.weight}, %d: memref<64x96xf32> {linfuse.weight}) -> (memref<192x64xf32>, memref<64x96xf32>) {
  %alloc = memref.alloc() {alignment = 64 : i64} : memref<192x64xf32>
  %s0 = memref.subview %alloc[0, 0] [96, 64] [1, 1] : memref<192x64xf32> to memref<96x64xf32, strided<[64, 1]>>
  memref.copy %g, %s0 : memref<96x64xf32> to memref<96x64xf32, strided<[64, 1]>>
  %s1 = memref.subview %alloc[96, 0] [96, 64] [1, 1] : memref<192x64xf32> to memref<96x64xf32, strided<[64, 1], offset: 6144>>
  memref.copy %u, %s1 : memref<96x64xf32> to memref<96x64xf32, strided<[64, 1], offset: 6144>>
  return %alloc, %d : memref<192x64xf32>, memref<64x96xf32>
}
func.func @f(%x: memref<?x64xf32>, %w: memref<192x64xf32> {linfuse.packed = 0 : i64}, %d: memref<64x96xf32> {linfuse.packed = 1 : i64}) attributes {linfuse.pack_function = @f__pack} {
  return
}

// -----

// Q, K and V of different heights (bf16: 2 bytes), copied in the order
// k, q, v by row offset: the order of the rows decides (q at 0, k at 64,
// v at 96), and each next weight must start where the previous one ends.
// CHECK-LABEL: func.func @qkv__pack(
// CHECK-SAME:      %[[K:[a-z0-9]+]]: memref<32x64xbf16>, %[[Q:[a-z0-9]+]]: memref<64x64xbf16>, %[[V:[a-z0-9]+]]: memref<32x64xbf16>)
// CHECK:         %[[QADDR:.*]] = arith.addi
// CHECK:         %[[KADDR:.*]] = arith.addi
// CHECK-NEXT:    %[[AT64:.*]] = arith.constant 8192 : index
// CHECK-NEXT:    %[[KWANT:.*]] = arith.addi %[[QADDR]], %[[AT64]] : index
// CHECK-NEXT:    %{{.*}} = arith.cmpi eq, %[[KADDR]], %[[KWANT]] : index
// CHECK:         %[[VADDR:.*]] = arith.addi
// CHECK-NEXT:    %[[AT96:.*]] = arith.constant 12288 : index
// CHECK-NEXT:    %[[VWANT:.*]] = arith.addi %[[QADDR]], %[[AT96]] : index
// CHECK-NEXT:    %{{.*}} = arith.cmpi eq, %[[VADDR]], %[[VWANT]] : index
// CHECK:         scf.if
// CHECK-NEXT:      memref.reinterpret_cast %[[Q]] to offset: [0], sizes: [128, 64], strides: [64, 1] : memref<64x64xbf16> to memref<128x64xbf16>
func.func @qkv__pack(%k: memref<32x64xbf16>, %q: memref<64x64xbf16>, %v: memref<32x64xbf16>) -> memref<128x64xbf16> {
  %alloc = memref.alloc() : memref<128x64xbf16>
  %sk = memref.subview %alloc[64, 0] [32, 64] [1, 1] : memref<128x64xbf16> to memref<32x64xbf16, strided<[64, 1], offset: 4096>>
  memref.copy %k, %sk : memref<32x64xbf16> to memref<32x64xbf16, strided<[64, 1], offset: 4096>>
  %sq = memref.subview %alloc[0, 0] [64, 64] [1, 1] : memref<128x64xbf16> to memref<64x64xbf16, strided<[64, 1]>>
  memref.copy %q, %sq : memref<64x64xbf16> to memref<64x64xbf16, strided<[64, 1]>>
  %sv = memref.subview %alloc[96, 0] [32, 64] [1, 1] : memref<128x64xbf16> to memref<32x64xbf16, strided<[64, 1], offset: 6144>>
  memref.copy %v, %sv : memref<32x64xbf16> to memref<32x64xbf16, strided<[64, 1], offset: 6144>>
  return %alloc : memref<128x64xbf16>
}
func.func @qkv(%w: memref<128x64xbf16>) attributes {linfuse.pack_function = @qkv__pack} {
  return
}

// -----

// Not a packing function (no function names it): its copies stay.
// CHECK-LABEL: func.func @not_pack(
// CHECK-NOT:     scf.if
// CHECK:         return %{{.*}} : memref<192x64xf32>
func.func @not_pack(%g: memref<96x64xf32>, %u: memref<96x64xf32>) -> memref<192x64xf32> {
  %alloc = memref.alloc() : memref<192x64xf32>
  %s0 = memref.subview %alloc[0, 0] [96, 64] [1, 1] : memref<192x64xf32> to memref<96x64xf32, strided<[64, 1]>>
  memref.copy %g, %s0 : memref<96x64xf32> to memref<96x64xf32, strided<[64, 1]>>
  %s1 = memref.subview %alloc[96, 0] [96, 64] [1, 1] : memref<192x64xf32> to memref<96x64xf32, strided<[64, 1], offset: 6144>>
  memref.copy %u, %s1 : memref<96x64xf32> to memref<96x64xf32, strided<[64, 1], offset: 6144>>
  return %alloc : memref<192x64xf32>
}

// -----

// Not whole rows: two weights side by side in the columns (a concat along
// dim 1 is not their bytes one after the other). Unchanged.
// CHECK-LABEL: func.func @columns__pack(
// CHECK-NOT:     scf.if
// CHECK:         memref.alloc() : memref<64x192xf32>
// CHECK:         return
func.func @columns__pack(%a: memref<64x96xf32>, %b: memref<64x96xf32>) -> memref<64x192xf32> {
  %alloc = memref.alloc() : memref<64x192xf32>
  %s0 = memref.subview %alloc[0, 0] [64, 96] [1, 1] : memref<64x192xf32> to memref<64x96xf32, strided<[192, 1]>>
  memref.copy %a, %s0 : memref<64x96xf32> to memref<64x96xf32, strided<[192, 1]>>
  %s1 = memref.subview %alloc[0, 96] [64, 96] [1, 1] : memref<64x192xf32> to memref<64x96xf32, strided<[192, 1], offset: 96>>
  memref.copy %b, %s1 : memref<64x96xf32> to memref<64x96xf32, strided<[192, 1], offset: 96>>
  return %alloc : memref<64x192xf32>
}
func.func @columns(%w: memref<64x192xf32>) attributes {linfuse.pack_function = @columns__pack} {
  return
}

// -----

// A merged weight whose rows are also written by something else (a fill of
// the bias row), one that leaves a row uncovered, and one filled by a
// computed buffer rather than an argument: each stays a copy.
// CHECK-LABEL: func.func @mixed__pack(
// CHECK-NOT:     scf.if
// CHECK:         return
func.func @mixed__pack(%a: memref<4x8xf32>, %b: memref<4x8xf32>) -> (memref<9x8xf32>, memref<9x8xf32>, memref<8x8xf32>) {
  %zero = arith.constant 0.0 : f32
  %filled = memref.alloc() : memref<9x8xf32>
  linalg.fill ins(%zero : f32) outs(%filled : memref<9x8xf32>)
  %f0 = memref.subview %filled[0, 0] [4, 8] [1, 1] : memref<9x8xf32> to memref<4x8xf32, strided<[8, 1]>>
  memref.copy %a, %f0 : memref<4x8xf32> to memref<4x8xf32, strided<[8, 1]>>
  %f1 = memref.subview %filled[4, 0] [4, 8] [1, 1] : memref<9x8xf32> to memref<4x8xf32, strided<[8, 1], offset: 32>>
  memref.copy %b, %f1 : memref<4x8xf32> to memref<4x8xf32, strided<[8, 1], offset: 32>>
  %gap = memref.alloc() : memref<9x8xf32>
  %g0 = memref.subview %gap[0, 0] [4, 8] [1, 1] : memref<9x8xf32> to memref<4x8xf32, strided<[8, 1]>>
  memref.copy %a, %g0 : memref<4x8xf32> to memref<4x8xf32, strided<[8, 1]>>
  %g1 = memref.subview %gap[5, 0] [4, 8] [1, 1] : memref<9x8xf32> to memref<4x8xf32, strided<[8, 1], offset: 40>>
  memref.copy %b, %g1 : memref<4x8xf32> to memref<4x8xf32, strided<[8, 1], offset: 40>>
  %scaled = memref.alloc() : memref<4x8xf32>
  linalg.fill ins(%zero : f32) outs(%scaled : memref<4x8xf32>)
  %computed = memref.alloc() : memref<8x8xf32>
  %c0 = memref.subview %computed[0, 0] [4, 8] [1, 1] : memref<8x8xf32> to memref<4x8xf32, strided<[8, 1]>>
  memref.copy %scaled, %c0 : memref<4x8xf32> to memref<4x8xf32, strided<[8, 1]>>
  %c1 = memref.subview %computed[4, 0] [4, 8] [1, 1] : memref<8x8xf32> to memref<4x8xf32, strided<[8, 1], offset: 32>>
  memref.copy %b, %c1 : memref<4x8xf32> to memref<4x8xf32, strided<[8, 1], offset: 32>>
  return %filled, %gap, %computed : memref<9x8xf32>, memref<9x8xf32>, memref<8x8xf32>
}
func.func @mixed(%w: memref<9x8xf32>) attributes {linfuse.pack_function = @mixed__pack} {
  return
}
