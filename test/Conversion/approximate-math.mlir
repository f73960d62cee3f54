// RUN: linfuse-opt %s --linfuse-approximate-math --split-input-file | FileCheck %s

// f32 exp (SiLU's, softmax's) becomes arithmetic: no libm call is left in
// the loop, so LLVM can vectorize it.
// CHECK-LABEL: func.func @exp(
// CHECK-NOT:     math.exp
// CHECK:         math.fma
// CHECK:         arith.shli
// CHECK-NOT:     math.exp
// CHECK:         return
func.func @exp(%x: f32) -> f32 {
  %e = math.exp %x : f32
  return %e : f32
}

// -----

// tanh (GELU's tanh form) and erf (its exact form) likewise, in vectors too.
// CHECK-LABEL: func.func @gelu_parts(
// CHECK-NOT:     math.tanh
// CHECK-NOT:     math.erf
// CHECK:         return
func.func @gelu_parts(%x: f32, %v: vector<8xf32>) -> (f32, vector<8xf32>) {
  %t = math.tanh %x : f32
  %e = math.erf %v : vector<8xf32>
  return %t, %e : f32, vector<8xf32>
}

// -----

// Negative: f64 math, and functions without an approximation as accurate as
// libm (pow) or with a vectorizable LLVM intrinsic already (sqrt), stay.
// CHECK-LABEL: func.func @kept(
// CHECK-NEXT:    %[[E:.*]] = math.exp %{{.*}} : f64
// CHECK-NEXT:    %[[P:.*]] = math.powf %{{.*}}, %{{.*}} : f32
// CHECK-NEXT:    %[[S:.*]] = math.sqrt %{{.*}} : f32
// CHECK-NEXT:    return %[[E]], %[[P]], %[[S]]
func.func @kept(%d: f64, %x: f32, %y: f32) -> (f64, f32, f32) {
  %e = math.exp %d : f64
  %p = math.powf %x, %y : f32
  %s = math.sqrt %x : f32
  return %e, %p, %s : f64, f32, f32
}
