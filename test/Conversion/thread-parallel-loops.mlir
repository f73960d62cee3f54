// RUN: linfuse-opt %s --linfuse-thread-parallel-loops --split-input-file | FileCheck %s
// The result lowers to LLVM and passes the verifier (the unrealized casts
// between memrefs and their descriptors cancel out):
// RUN: linfuse-opt %s --linfuse-thread-parallel-loops --split-input-file --lower-affine --convert-scf-to-cf --finalize-memref-to-llvm --convert-to-llvm --reconcile-unrealized-casts | FileCheck %s --check-prefix=LLVM

// Straight-line body: the outer dimensions become one range of
// iterations, the innermost (64, a constant again in the body) stays whole.
// The memrefs are stored as their descriptors, the scalar as it is, the
// size that undoes the collapse as an i64.
// CHECK-LABEL: func.func @elementwise(
// CHECK-SAME:      %[[A:.*]]: memref<?x?x64xf32>, %[[B:.*]]: memref<?x?x64xf32>, %[[S:.*]]: f32)
// CHECK:         %[[CTX:.*]] = llvm.alloca %{{.*}} x !llvm.struct<(i64, struct<(ptr, ptr, i64, array<3 x i64>, array<3 x i64>)>, f32, struct<(ptr, ptr, i64, array<3 x i64>, array<3 x i64>)>)>
// CHECK:         %[[M:.*]] = memref.dim %[[A]], %{{.*}}
// CHECK:         %[[N:.*]] = memref.dim %[[A]], %{{.*}}
// CHECK:         %[[MN:.*]] = arith.muli %{{.*}}, %[[N]] : index
// CHECK:         %[[ITERS:.*]] = arith.maxsi
// CHECK:         %[[WORK:.*]] = arith.muli %{{.*}}, %{{.*}} : index
// CHECK:         %[[N64:.*]] = arith.index_cast %[[N]] : index to i64
// CHECK:         %[[F0:.*]] = llvm.getelementptr %[[CTX]][0, 0]
// CHECK-NEXT:    llvm.store %[[N64]], %[[F0]] : i64, !llvm.ptr
// CHECK-NEXT:    %[[DA:.*]] = builtin.unrealized_conversion_cast %[[A]] : memref<?x?x64xf32> to !llvm.struct<(ptr, ptr, i64, array<3 x i64>, array<3 x i64>)>
// CHECK-NEXT:    %[[F1:.*]] = llvm.getelementptr %[[CTX]][0, 1]
// CHECK-NEXT:    llvm.store %[[DA]], %[[F1]]
// CHECK-NEXT:    %[[F2:.*]] = llvm.getelementptr %[[CTX]][0, 2]
// CHECK-NEXT:    llvm.store %[[S]], %[[F2]] : f32, !llvm.ptr
// CHECK-NEXT:    %[[DB:.*]] = builtin.unrealized_conversion_cast %[[B]]
// CHECK-NEXT:    %[[F3:.*]] = llvm.getelementptr %[[CTX]][0, 3]
// CHECK-NEXT:    llvm.store %[[DB]], %[[F3]]
// CHECK-NEXT:    %[[FN:.*]] = constant @elementwise__parallel0 : (index, index, !llvm.ptr) -> ()
// CHECK-NEXT:    %[[FNP:.*]] = builtin.unrealized_conversion_cast %[[FN]] : (index, index, !llvm.ptr) -> () to !llvm.ptr
// CHECK-NEXT:    %[[I64:.*]] = arith.index_cast %[[ITERS]] : index to i64
// CHECK-NEXT:    %[[W64:.*]] = arith.index_cast %[[WORK]] : index to i64
// CHECK-NEXT:    call @linfuse_parallel_for(%[[FNP]], %[[CTX]], %[[I64]], %[[W64]]) : (!llvm.ptr, !llvm.ptr, i64, i64) -> ()
// CHECK-NOT:     scf.parallel
// CHECK:         return
// CHECK-LABEL: func.func private @elementwise__parallel0(
// CHECK-SAME:      %[[LO:.*]]: index, %[[HI:.*]]: index, %[[C:.*]]: !llvm.ptr)
// CHECK-DAG:     %[[G0:.*]] = llvm.getelementptr %[[C]][0, 0]
// CHECK-DAG:     %[[L0:.*]] = llvm.load %[[G0]] : !llvm.ptr -> i64
// CHECK-DAG:     %[[NN:.*]] = arith.index_cast %[[L0]] : i64 to index
// CHECK-DAG:     %[[L1:.*]] = llvm.load %{{.*}} : !llvm.ptr -> !llvm.struct<(ptr, ptr, i64, array<3 x i64>, array<3 x i64>)>
// CHECK-DAG:     %[[AA:.*]] = builtin.unrealized_conversion_cast %[[L1]] : {{.*}} to memref<?x?x64xf32>
// CHECK-DAG:     %[[SS:.*]] = llvm.load %{{.*}} : !llvm.ptr -> f32
// CHECK:         scf.parallel (%[[R:.*]], %[[K:.*]]) = (%[[LO]], %{{.*}}) to (%[[HI]], %c64{{(_[0-9]+)?}})
// CHECK:           %[[J:.*]] = arith.remsi %{{.*}}, %[[NN]] : index
// CHECK:           %[[I:.*]] = arith.divsi %{{.*}}, %[[NN]] : index
// CHECK:           %[[X:.*]] = memref.load %[[AA]][%[[I]], %[[J]], %[[K]]]
// CHECK:           arith.mulf %[[X]], %[[SS]] : f32
// LLVM-LABEL: llvm.func @elementwise(
// LLVM:         llvm.call @linfuse_parallel_for(
// LLVM-LABEL: llvm.func @elementwise__parallel0(
// LLVM-SAME:      %{{.*}}: i64, %{{.*}}: i64, %{{.*}}: !llvm.ptr)
func.func @elementwise(%a: memref<?x?x64xf32>, %b: memref<?x?x64xf32>, %s: f32) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %m = memref.dim %a, %c0 : memref<?x?x64xf32>
  %n = memref.dim %a, %c1 : memref<?x?x64xf32>
  scf.parallel (%i, %j, %k) = (%c0, %c0, %c0) to (%m, %n, %c64) step (%c1, %c1, %c1) {
    %x = memref.load %a[%i, %j, %k] : memref<?x?x64xf32>
    %y = arith.mulf %x, %s : f32
    memref.store %y, %b[%i, %j, %k] : memref<?x?x64xf32>
    scf.reduce
  }
  return
}

// -----

// A body with a loop of its own (a row sum): every dimension goes into the
// range, the inner loop stays in the body.
// CHECK-LABEL: func.func @rows(
// CHECK:         call @linfuse_parallel_for(
// CHECK-LABEL: func.func private @rows__parallel0(
// CHECK-SAME:      %[[LO:.*]]: index, %[[HI:.*]]: index, %{{.*}}: !llvm.ptr)
// CHECK:         scf.parallel (%{{.*}}) = (%[[LO]]) to (%[[HI]])
// CHECK:           scf.for %{{.*}} = %{{.*}} to %{{.*}} step
// CHECK:             memref.load
// CHECK:             arith.addf
func.func @rows(%a: memref<?x?x64xf32>, %s: memref<?x?xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %m = memref.dim %a, %c0 : memref<?x?x64xf32>
  %n = memref.dim %a, %c1 : memref<?x?x64xf32>
  scf.parallel (%i, %j) = (%c0, %c0) to (%m, %n) step (%c1, %c1) {
    scf.for %k = %c0 to %c64 step %c1 {
      %x = memref.load %a[%i, %j, %k] : memref<?x?x64xf32>
      %acc = memref.load %s[%i, %j] : memref<?x?xf32>
      %y = arith.addf %x, %acc : f32
      memref.store %y, %s[%i, %j] : memref<?x?xf32>
    }
    scf.reduce
  }
  return
}

// -----

// Nothing captured (a global and constants are recomputed in the body):
// a null context. A lower bound and step other than 0 and 1: the body
// maps iteration i back to lb + i * step.
// CHECK-LABEL: func.func @strided_no_captures(
// CHECK:         %[[NULL:.*]] = llvm.mlir.zero : !llvm.ptr
// CHECK:         call @linfuse_parallel_for(%{{.*}}, %[[NULL]], %{{.*}}, %{{.*}})
// CHECK-LABEL: func.func private @strided_no_captures__parallel0(
// CHECK-DAG:     %[[G:.*]] = memref.get_global @table : memref<64xf32>
// CHECK-DAG:     %[[C2:.*]] = arith.constant 2 : index
// CHECK-DAG:     %[[C3:.*]] = arith.constant 3 : index
// CHECK:         scf.parallel (%[[IT:.*]]) =
// CHECK-NEXT:      %[[SCALED:.*]] = arith.muli %[[IT]], %[[C3]] : index
// CHECK-NEXT:      %[[IV:.*]] = arith.addi %[[C2]], %[[SCALED]] : index
// CHECK-NEXT:      memref.store %{{.*}}, %[[G]][%[[IV]]]
memref.global "private" @table : memref<64xf32> = dense<1.0>
func.func @strided_no_captures() {
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %c64 = arith.constant 64 : index
  %zero = arith.constant 0.0 : f32
  %g = memref.get_global @table : memref<64xf32>
  scf.parallel (%i) = (%c2) to (%c64) step (%c3) {
    memref.store %zero, %g[%i] : memref<64xf32>
    scf.reduce
  }
  return
}

// -----

// Inside another loop: the context is allocated once, at the function's
// entry, not per iteration; only the outermost scf.parallel is outlined.
// CHECK-LABEL: func.func @in_loop(
// CHECK-NEXT:    llvm.mlir.constant(1 : i64) : i64
// CHECK-NEXT:    llvm.alloca
// CHECK:         scf.for
// CHECK:           call @linfuse_parallel_for(
// CHECK-LABEL: func.func private @in_loop__parallel0(
// CHECK:         scf.parallel
// CHECK:           scf.parallel
func.func @in_loop(%a: memref<?x?xf32>, %t: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %m = memref.dim %a, %c0 : memref<?x?xf32>
  %n = memref.dim %a, %c1 : memref<?x?xf32>
  scf.for %r = %c0 to %t step %c1 {
    scf.parallel (%i) = (%c0) to (%m) step (%c1) {
      scf.parallel (%j) = (%c0) to (%n) step (%c1) {
        %x = memref.load %a[%i, %j] : memref<?x?xf32>
        %y = arith.addf %x, %x : f32
        memref.store %y, %a[%i, %j] : memref<?x?xf32>
        scf.reduce
      }
      scf.reduce
    }
  }
  return
}

// -----

// Left on the calling thread: a body that asserts (a failed check records
// the error of the thread that runs it), one that calls a function, a loop
// with results (a reduction across iterations), a body that reads a vector
// from outside (no plain LLVM form to store it in).
// CHECK-LABEL: func.func @asserts(
// CHECK-NOT:     linfuse_parallel_for
// CHECK:         scf.parallel
// CHECK:           cf.assert
func.func @asserts(%a: memref<?xf32>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.parallel (%i) = (%c0) to (%n) step (%c1) {
    %ok = arith.cmpi ult, %i, %n : index
    cf.assert %ok, "out of bounds"
    %x = memref.load %a[%i] : memref<?xf32>
    scf.reduce
  }
  return
}
// CHECK-LABEL: func.func @calls(
// CHECK-NOT:     linfuse_parallel_for
// CHECK:         scf.parallel
// CHECK:           call @sink
func.func private @sink(f32)
func.func @calls(%a: memref<?xf32>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.parallel (%i) = (%c0) to (%n) step (%c1) {
    %x = memref.load %a[%i] : memref<?xf32>
    func.call @sink(%x) : (f32) -> ()
    scf.reduce
  }
  return
}
// CHECK-LABEL: func.func @reduction(
// CHECK-NOT:     linfuse_parallel_for
// CHECK:         scf.parallel {{.*}} init
func.func @reduction(%a: memref<?xf32>, %n: index) -> f32 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.0 : f32
  %sum = scf.parallel (%i) = (%c0) to (%n) step (%c1) init (%zero) -> f32 {
    %x = memref.load %a[%i] : memref<?xf32>
    scf.reduce(%x : f32) {
    ^bb0(%l: f32, %r: f32):
      %s = arith.addf %l, %r : f32
      scf.reduce.return %s : f32
    }
  }
  return %sum : f32
}
// CHECK-LABEL: func.func @vector_capture(
// CHECK-NOT:     linfuse_parallel_for
// CHECK:         scf.parallel
// CHECK-NOT:   func.func private @vector_capture__parallel0
func.func @vector_capture(%a: memref<?xvector<4xf32>>, %v: vector<4xf32>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.parallel (%i) = (%c0) to (%n) step (%c1) {
    memref.store %v, %a[%i] : memref<?xvector<4xf32>>
    scf.reduce
  }
  return
}

// -----

// A memref.copy (a packing function's concatenation, a result copied out)
// becomes a loop nest of loads and stores first, and runs on the pool too.
// CHECK-LABEL: func.func @copy(
// CHECK-NOT:     memref.copy
// CHECK:         call @linfuse_parallel_for(
// CHECK-LABEL: func.func private @copy__parallel0(
// CHECK:         scf.parallel
// CHECK:           %[[V:.*]] = memref.load
// CHECK:           memref.store %[[V]]
func.func @copy(%a: memref<?x64xf32>, %b: memref<?x64xf32, strided<[128, 1]>>) {
  memref.copy %a, %b : memref<?x64xf32> to memref<?x64xf32, strided<[128, 1]>>
  return
}

// -----

// Loops that do the same on other buffers (a layer's two norms, the
// residual adds of several layers; here in two functions) share one
// outlined body: LLVM compiles it once. A loop that differs in one
// constant gets a body of its own, named after the last one kept.
// CHECK-LABEL: func.func @same_twice(
// CHECK:         constant @same_twice__parallel0
// CHECK:         constant @same_twice__parallel0
// CHECK:         constant @same_twice__parallel1
// CHECK:         return
// CHECK-LABEL: func.func private @same_twice__parallel0(
// CHECK:         arith.constant 2.000000e+00 : f32
// CHECK-LABEL: func.func private @same_twice__parallel1(
// CHECK:         arith.constant 3.000000e+00 : f32
// CHECK-LABEL: func.func @same_elsewhere(
// CHECK:         constant @same_twice__parallel0
// CHECK-NOT:   func.func private @same_twice__parallel2
// CHECK-NOT:   func.func private @same_elsewhere__parallel
func.func @same_twice(%a: memref<?xf32>, %b: memref<?xf32>, %c: memref<?xf32>,
                      %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %two = arith.constant 2.0 : f32
  %three = arith.constant 3.0 : f32
  scf.parallel (%i) = (%c0) to (%n) step (%c1) {
    %x = memref.load %a[%i] : memref<?xf32>
    %y = arith.mulf %x, %two : f32
    memref.store %y, %b[%i] : memref<?xf32>
    scf.reduce
  }
  scf.parallel (%i) = (%c0) to (%n) step (%c1) {
    %x = memref.load %b[%i] : memref<?xf32>
    %y = arith.mulf %x, %two : f32
    memref.store %y, %c[%i] : memref<?xf32>
    scf.reduce
  }
  scf.parallel (%i) = (%c0) to (%n) step (%c1) {
    %x = memref.load %c[%i] : memref<?xf32>
    %y = arith.mulf %x, %three : f32
    memref.store %y, %a[%i] : memref<?xf32>
    scf.reduce
  }
  return
}
func.func @same_elsewhere(%a: memref<?xf32>, %b: memref<?xf32>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %two = arith.constant 2.0 : f32
  scf.parallel (%i) = (%c0) to (%n) step (%c1) {
    %x = memref.load %b[%i] : memref<?xf32>
    %y = arith.mulf %x, %two : f32
    memref.store %y, %a[%i] : memref<?xf32>
    scf.reduce
  }
  return
}
