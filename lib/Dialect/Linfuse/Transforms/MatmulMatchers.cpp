//===- MatmulMatchers.cpp - recognize matmuls and what feeds them ---------===//

#include "linfuse/Dialect/Linfuse/Transforms/MatmulMatchers.h"
#include "linfuse/Dialect/Linfuse/Transforms/WeightConstants.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/AffineMap.h"
#include "mlir/IR/Matchers.h"

using namespace mlir;
using namespace mlir::linfuse;

Type MatmulInfo::lhsElementType() const {
  return cast<ShapedType>(lhs.getType()).getElementType();
}
Type MatmulInfo::weightElementType() const {
  return cast<ShapedType>(weight.getType()).getElementType();
}
Type MatmulInfo::resultElementType() const {
  return cast<ShapedType>(op->getResult(0).getType()).getElementType();
}
Value MatmulInfo::finalResult() const {
  return biasAdd ? biasAdd->result() : op->getResult(0);
}
int64_t MatmulInfo::weightBytes() const {
  auto type = cast<ShapedType>(weight.getType());
  return type.hasStaticShape() ? getByteSize(type) : 0;
}

/// Builds `(d0, ..., d{n-1}) -> (d{dims[0]}, d{dims[1]}, ...)`.
static AffineMap projection(MLIRContext *ctx, unsigned numDims,
                            ArrayRef<unsigned> dims) {
  SmallVector<AffineExpr> exprs;
  for (unsigned d : dims)
    exprs.push_back(getAffineDimExpr(d, ctx));
  return AffineMap::get(numDims, 0, exprs, ctx);
}

bool mlir::linfuse::isGemmElementTypes(Operation *op, Type a, Type b, Type c) {
  if (a != b)
    return false;
  if (isa<FloatType>(a))
    return isa<FloatType>(c);
  auto cast = op->getAttrOfType<linalg::TypeFnAttr>("cast");
  return a.isInteger(8) && c.isInteger(32) &&
         (!cast || cast.getValue() == linalg::TypeFn::cast_signed);
}

std::optional<MatmulInfo> mlir::linfuse::matchMatmul(Operation *op) {
  if (!isa<linalg::MatmulOp, linalg::BatchMatmulOp>(op))
    return std::nullopt;
  auto linalgOp = cast<linalg::LinalgOp>(op);
  if (!linalgOp.hasPureTensorSemantics() || op->getNumResults() != 1 ||
      linalgOp.getNumDpsInputs() != 2)
    return std::nullopt;

  MatmulInfo info;
  info.op = linalgOp;
  info.batched = isa<linalg::BatchMatmulOp>(op);
  info.lhs = linalgOp.getDpsInputOperand(0)->get();
  info.rhs = linalgOp.getDpsInputOperand(1)->get();
  info.init = linalgOp.getDpsInitOperand(0)->get();

  auto lhsType = dyn_cast<RankedTensorType>(info.lhs.getType());
  auto rhsType = dyn_cast<RankedTensorType>(info.rhs.getType());
  auto resType = dyn_cast<RankedTensorType>(op->getResult(0).getType());
  if (!lhsType || !rhsType || !resType)
    return std::nullopt;
  // Encoded (e.g. sparse) tensors, empty dims and absurd sizes are not
  // rewritten: concatenation and slicing assume plain dense storage.
  if (lhsType.getEncoding() || rhsType.getEncoding() || resType.getEncoding())
    return std::nullopt;
  for (RankedTensorType t : {lhsType, rhsType, resType})
    for (int64_t d : t.getShape())
      if (d == 0 || (!ShapedType::isDynamic(d) && d > (int64_t(1) << 32)))
        return std::nullopt;
  if (!isGemmElementTypes(op, lhsType.getElementType(),
                          rhsType.getElementType(), resType.getElementType()))
    return std::nullopt;

  // Loop dims: (m, n, k) or (b, m, n, k).
  MLIRContext *ctx = op->getContext();
  unsigned b = info.batched ? 1 : 0;
  unsigned numDims = 3 + b;
  unsigned m = b, n = b + 1, k = b + 2;
  auto withBatch = [&](std::initializer_list<unsigned> dims) {
    SmallVector<unsigned> all;
    if (info.batched)
      all.push_back(0);
    all.append(dims.begin(), dims.end());
    return projection(ctx, numDims, all);
  };
  info.maps.assign(linalgOp.getIndexingMapsArray());
  ArrayRef<AffineMap> maps = info.maps;
  if (maps[2] != withBatch({m, n}))
    return std::nullopt;
  if (maps[0] == withBatch({m, k}))
    info.lhsTransposed = false;
  else if (maps[0] == withBatch({k, m}))
    info.lhsTransposed = true;
  else
    return std::nullopt;
  info.lhsMap = maps[0];

  WeightLayout rhsLayout;
  if (maps[1] == withBatch({k, n}))
    rhsLayout = WeightLayout::KN;
  else if (maps[1] == withBatch({n, k}))
    rhsLayout = WeightLayout::NK;
  else
    return std::nullopt;

  // Look through a transpose of the weight's last two dims (torch-mlir
  // emits `linalg.transpose %w [out, in] -> [in, out]` before a plain matmul).
  info.weight = info.rhs;
  info.layout = rhsLayout;
  if (auto transpose = info.rhs.getDefiningOp<linalg::TransposeOp>()) {
    SmallVector<int64_t> swapLast = info.batched ? SmallVector<int64_t>{0, 2, 1}
                                                 : SmallVector<int64_t>{1, 0};
    if (transpose.getPermutation() == ArrayRef<int64_t>(swapLast) &&
        transpose.hasPureTensorSemantics()) {
      info.weight = transpose.getInput();
      info.layout =
          rhsLayout == WeightLayout::KN ? WeightLayout::NK : WeightLayout::KN;
      info.weightTranspose = transpose;
    }
  }

  // K and N are static; a batch matmul's per-batch weights may have a
  // dynamic batch (that of the input, like attention's per-sequence values).
  auto weightType = cast<RankedTensorType>(info.weight.getType());
  unsigned wb = info.batched ? 1 : 0;
  for (int64_t d : weightType.getShape().drop_front(wb))
    if (ShapedType::isDynamic(d))
      return std::nullopt;
  info.k =
      weightType.getDimSize(wb + (info.layout == WeightLayout::KN ? 0 : 1));
  info.n =
      weightType.getDimSize(wb + (info.layout == WeightLayout::KN ? 1 : 0));
  info.batch = info.batched ? weightType.getDimSize(0) : 1;
  if (resType.getDimSize(resType.getRank() - 1) != info.n)
    return std::nullopt;
  // The result's leading dims must be spelled like the LHS's (static or
  // dynamic alike): merged types and slices are derived from the LHS.
  unsigned lhsM = b + (info.lhsTransposed ? 1 : 0);
  if (resType.getDimSize(b) != lhsType.getDimSize(lhsM) ||
      (info.batched && resType.getDimSize(0) != lhsType.getDimSize(0)))
    return std::nullopt;
  if (weightType.hasStaticShape() &&
      weightType.getNumElements() > (int64_t(1) << 40))
    return std::nullopt;

  if (op->getResult(0).hasOneUse())
    info.biasAdd =
        matchBiasAdd(*op->getResult(0).getUsers().begin(), op->getResult(0));
  return info;
}

/// True when `v` is the float constant 1 (an `arith.constant`, inside the
/// body or captured from above).
static bool isOne(Value v) {
  FloatAttr value;
  return matchPattern(v, m_Constant(&value)) &&
         value.getValue().isExactlyValue(1.0);
}

/// True when `body` is `yield(addf(x, y))` with {x, y} = {lhsArg, rhsArg},
/// where `rhsArg` may also be scaled by exactly 1 (torch's `add(a, b,
/// alpha=1)` lowers to `a + b * alpha` when nothing folded the multiply).
static bool isAddOf(Block &body, BlockArgument lhsArg, BlockArgument rhsArg) {
  auto yield = dyn_cast<linalg::YieldOp>(body.getTerminator());
  if (!yield || yield.getNumOperands() != 1)
    return false;
  auto add = yield.getOperand(0).getDefiningOp<arith::AddFOp>();
  if (!add || add->getBlock() != &body)
    return false;
  // The other summand: the bias argument itself, or a multiply of it by 1.
  Value scaled = add.getLhs() == lhsArg   ? add.getRhs()
                 : add.getRhs() == lhsArg ? add.getLhs()
                                          : Value();
  if (!scaled)
    return false;
  unsigned numOps = 1;
  if (scaled != rhsArg) {
    auto mul = scaled.getDefiningOp<arith::MulFOp>();
    if (!mul || mul->getBlock() != &body ||
        !((mul.getLhs() == rhsArg && isOne(mul.getRhs())) ||
          (mul.getRhs() == rhsArg && isOne(mul.getLhs()))))
      return false;
    numOps = 2;
    // A constant 1 defined in the body counts as an op of its own.
    for (Value factor : {mul.getLhs(), mul.getRhs()})
      if (Operation *def = factor.getDefiningOp();
          def && def->getBlock() == &body)
        ++numOps;
  }
  // Nothing else in the body (the add's value is all it yields).
  return static_cast<size_t>(std::distance(body.without_terminator().begin(),
                                           body.without_terminator().end())) ==
         numOps;
}

/// The 1-D vector that `v` broadcasts to every row, if `v` is such a
/// broadcast of rank `rank`: `linalg.broadcast` along all but the last dim,
/// or torch-mlir's `linalg.generic {(d...) -> (d_last), identity}` that
/// yields its input.
static Operation *matchRowBroadcast(Value v, int64_t rank, Value &source) {
  MLIRContext *ctx = v.getContext();
  if (auto broadcast = v.getDefiningOp<linalg::BroadcastOp>()) {
    SmallVector<int64_t> leading =
        llvm::to_vector(llvm::seq<int64_t>(0, rank - 1));
    if (!broadcast.hasPureTensorSemantics() ||
        broadcast.getDimensions() != ArrayRef<int64_t>(leading))
      return nullptr;
    source = broadcast.getInput();
    return broadcast;
  }
  auto generic = v.getDefiningOp<linalg::GenericOp>();
  if (!generic || !generic.hasPureTensorSemantics() ||
      generic.getNumDpsInputs() != 1 || generic.getNumDpsInits() != 1 ||
      generic->getNumResults() != 1 ||
      generic.getNumParallelLoops() != generic.getNumLoops() ||
      generic.getNumLoops() != static_cast<unsigned>(rank))
    return nullptr;
  OpOperand *input = generic.getDpsInputOperand(0);
  OpOperand *init = generic.getDpsInitOperand(0);
  if (generic.getMatchingIndexingMap(input) !=
          AffineMap::get(rank, 0, getAffineDimExpr(rank - 1, ctx), ctx) ||
      generic.getMatchingIndexingMap(init) !=
          AffineMap::getMultiDimIdentityMap(rank, ctx))
    return nullptr;
  Block &body = *generic.getBlock();
  auto yield = dyn_cast<linalg::YieldOp>(body.getTerminator());
  if (!body.without_terminator().empty() || !yield ||
      yield.getNumOperands() != 1 ||
      yield.getOperand(0) != generic.getMatchingBlockArgument(input))
    return nullptr;
  source = input->get();
  return generic;
}

std::optional<BiasAdd> mlir::linfuse::matchBiasAdd(Operation *user,
                                                   Value matmulResult) {
  auto resultType = cast<RankedTensorType>(matmulResult.getType());
  int64_t rank = resultType.getRank();
  int64_t n = resultType.getDimSize(rank - 1);
  MLIRContext *ctx = user->getContext();
  auto isBiasVector = [&](Value v) {
    auto t = dyn_cast<RankedTensorType>(v.getType());
    return t && t.getRank() == 1 && t.getDimSize(0) == n &&
           t.getElementType() == resultType.getElementType();
  };
  if (user->getNumResults() != 1 || user->getResult(0).getType() != resultType)
    return std::nullopt;

  // linalg.add(matmul, linalg.broadcast(bias) along all but the last dim).
  if (auto add = dyn_cast<linalg::AddOp>(user)) {
    if (!add.hasPureTensorSemantics())
      return std::nullopt;
    // The matmul must be one of the two summands (not, say, the init, whose
    // value linalg.add ignores).
    Value in0 = add.getDpsInputOperand(0)->get();
    Value in1 = add.getDpsInputOperand(1)->get();
    if ((in0 == matmulResult) == (in1 == matmulResult))
      return std::nullopt;
    Value other = in0 == matmulResult ? in1 : in0;
    Value bias;
    Operation *broadcast = matchRowBroadcast(other, rank, bias);
    if (!broadcast || !isBiasVector(bias))
      return std::nullopt;
    return BiasAdd{user, bias, broadcast};
  }

  // linalg.generic computing addf (or torch's `a + b * 1`) of the matmul
  // result (identity map, as an input or as the init) and the bias: read
  // along the last dim, `(d...) -> (d_last)`, or with the identity map from
  // a row broadcast of it (torch-mlir's form).
  auto generic = dyn_cast<linalg::GenericOp>(user);
  if (!generic || !generic.hasPureTensorSemantics() ||
      generic.getNumDpsInits() != 1 ||
      generic.getNumParallelLoops() != generic.getNumLoops() ||
      generic.getNumLoops() != static_cast<unsigned>(rank))
    return std::nullopt;
  AffineMap identity = AffineMap::getMultiDimIdentityMap(rank, ctx);
  AffineMap lastDim =
      AffineMap::get(rank, 0, getAffineDimExpr(rank - 1, ctx), ctx);
  OpOperand *mmOperand = nullptr, *biasOperand = nullptr;
  Value bias;
  Operation *broadcast = nullptr;
  for (OpOperand &operand : generic->getOpOperands()) {
    AffineMap map = generic.getMatchingIndexingMap(&operand);
    bool isInit = generic.isDpsInit(&operand);
    Value source;
    Operation *rowBroadcast = nullptr;
    if (operand.get() == matmulResult && map == identity && !mmOperand) {
      mmOperand = &operand;
    } else if (!isInit && map == lastDim && isBiasVector(operand.get()) &&
               !biasOperand) {
      biasOperand = &operand;
      bias = operand.get();
    } else if (!isInit && map == identity && !biasOperand &&
               (rowBroadcast =
                    matchRowBroadcast(operand.get(), rank, source)) &&
               isBiasVector(source)) {
      biasOperand = &operand;
      bias = source;
      broadcast = rowBroadcast;
    } else if (isInit && map == identity)
      continue; // A plain destination; its value is ignored by the body.
    else
      return std::nullopt;
  }
  if (!mmOperand || !biasOperand)
    return std::nullopt;
  if (!isAddOf(*generic.getBlock(), generic.getMatchingBlockArgument(mmOperand),
               generic.getMatchingBlockArgument(biasOperand)))
    return std::nullopt;
  return BiasAdd{user, bias, broadcast};
}

std::optional<Attribute> mlir::linfuse::matchConstantFill(Value init) {
  auto fill = init.getDefiningOp<linalg::FillOp>();
  if (!fill || !fill.hasPureTensorSemantics() ||
      !fill.getOutputs()[0].getDefiningOp<tensor::EmptyOp>())
    return std::nullopt;
  Attribute value;
  if (!matchPattern(fill.getInputs()[0], m_Constant(&value)))
    return std::nullopt;
  return value;
}

Operation *mlir::linfuse::matchElementwiseUnary(Value v, Value &input) {
  auto generic = v.getDefiningOp<linalg::GenericOp>();
  if (!generic || !generic.hasPureTensorSemantics() ||
      generic.getNumDpsInputs() != 1 || generic.getNumDpsInits() != 1 ||
      generic->getNumResults() != 1 ||
      generic.getNumParallelLoops() != generic.getNumLoops() ||
      !llvm::all_of(generic.getIndexingMapsArray(),
                    [](AffineMap m) { return m.isIdentity(); }) ||
      generic.payloadUsesValueFromOperand(generic.getDpsInitOperand(0)))
    return nullptr;
  Block &body = *generic.getBlock();
  auto yield = dyn_cast<linalg::YieldOp>(body.getTerminator());
  if (!yield || yield.getNumOperands() != 1 || body.getOperations().size() != 2)
    return nullptr;
  Operation *op = yield.getOperand(0).getDefiningOp();
  if (!op || op->getBlock() != &body || op->getNumOperands() != 1 ||
      op->getOperand(0) != body.getArgument(0))
    return nullptr;
  input = generic.getDpsInputOperand(0)->get();
  return op;
}
