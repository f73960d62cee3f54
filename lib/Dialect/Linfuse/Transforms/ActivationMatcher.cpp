//===- ActivationMatcher.cpp - recognize GEMM epilogue activations --------===//

#include "linfuse/Dialect/Linfuse/Transforms/ActivationMatcher.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/Matchers.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cmath>

using namespace mlir;
using namespace mlir::linfuse;

double mlir::linfuse::evaluateEpilogue(Epilogue epilogue, double x) {
  switch (epilogue) {
  case Epilogue::None:
    return x;
  case Epilogue::Relu:
    return x > 0 ? x : 0;
  case Epilogue::GeluErf:
    return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
  case Epilogue::GeluTanh:
    return 0.5 * x *
           (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
  case Epilogue::Silu:
    return x / (1 + std::exp(-x));
  }
  return x;
}

namespace {
/// Evaluates a scalar region in double precision.
class BodyInterpreter {
public:
  explicit BodyInterpreter(Block &body) : body(body) {}

  /// The yielded value for input `x`, or std::nullopt when the body uses
  /// anything this interpreter does not model.
  std::optional<double> run(double x) {
    values.clear();
    values[body.getArgument(0)] = x;
    for (Operation &op : body.without_terminator()) {
      if (op.getNumResults() != 1)
        return std::nullopt;
      std::optional<double> r = eval(op);
      if (!r)
        return std::nullopt;
      values[op.getResult(0)] = *r;
    }
    auto yield = dyn_cast<linalg::YieldOp>(body.getTerminator());
    if (!yield || yield.getNumOperands() != 1)
      return std::nullopt;
    return get(yield.getOperand(0));
  }

  /// A value of the last run (after run() succeeded).
  double valueOf(Value v) const { return values.lookup(v); }

private:
  std::optional<double> get(Value v) {
    auto it = values.find(v);
    if (it != values.end())
      return it->second;
    // A constant captured from outside the generic.
    FloatAttr attr;
    if (auto c = v.getDefiningOp<arith::ConstantOp>())
      if ((attr = dyn_cast<FloatAttr>(c.getValue())))
        return attr.getValueAsDouble();
    return std::nullopt; // The init argument or an unknown value.
  }

  std::optional<double> eval(Operation &op) {
    SmallVector<double, 3> in;
    for (Value v : op.getOperands()) {
      std::optional<double> d = get(v);
      if (!d)
        return std::nullopt;
      in.push_back(*d);
    }
    auto binary = [&](auto fn) -> std::optional<double> {
      if (in.size() != 2)
        return std::nullopt;
      return fn(in[0], in[1]);
    };
    auto unary = [&](auto fn) -> std::optional<double> {
      if (in.size() != 1)
        return std::nullopt;
      return fn(in[0]);
    };
    return llvm::TypeSwitch<Operation *, std::optional<double>>(&op)
        .Case([&](arith::ConstantOp c) -> std::optional<double> {
          if (auto f = dyn_cast<FloatAttr>(c.getValue()))
            return f.getValueAsDouble();
          return std::nullopt;
        })
        .Case([&](arith::AddFOp) { return binary(std::plus<double>()); })
        .Case([&](arith::SubFOp) { return binary(std::minus<double>()); })
        .Case([&](arith::MulFOp) { return binary(std::multiplies<double>()); })
        .Case([&](arith::DivFOp) { return binary(std::divides<double>()); })
        .Case([&](arith::NegFOp) { return unary(std::negate<double>()); })
        .Case<arith::MaximumFOp, arith::MaxNumFOp>([&](auto) {
          return binary([](double a, double b) { return std::max(a, b); });
        })
        .Case<arith::MinimumFOp, arith::MinNumFOp>([&](auto) {
          return binary([](double a, double b) { return std::min(a, b); });
        })
        .Case([&](arith::ExtFOp) { return unary([](double a) { return a; }); })
        // Rounded to the narrower type: a value past its range becomes inf
        // (an f16 round trip saturates nothing).
        .Case([&](arith::TruncFOp t) -> std::optional<double> {
          auto type = dyn_cast<FloatType>(t.getType());
          if (!type || in.size() != 1)
            return std::nullopt;
          APFloat v(in[0]);
          bool lost;
          v.convert(type.getFloatSemantics(), APFloat::rmNearestTiesToEven,
                    &lost);
          v.convert(APFloat::IEEEdouble(), APFloat::rmNearestTiesToEven, &lost);
          return v.convertToDouble();
        })
        .Case([&](arith::CmpFOp cmp) -> std::optional<double> {
          if (in.size() != 2)
            return std::nullopt;
          double a = in[0], b = in[1];
          switch (cmp.getPredicate()) {
          case arith::CmpFPredicate::OGT:
          case arith::CmpFPredicate::UGT:
            return a > b;
          case arith::CmpFPredicate::OGE:
          case arith::CmpFPredicate::UGE:
            return a >= b;
          case arith::CmpFPredicate::OLT:
          case arith::CmpFPredicate::ULT:
            return a < b;
          case arith::CmpFPredicate::OLE:
          case arith::CmpFPredicate::ULE:
            return a <= b;
          default:
            return std::nullopt;
          }
        })
        .Case([&](arith::SelectOp) -> std::optional<double> {
          if (in.size() != 3)
            return std::nullopt;
          return in[0] != 0 ? in[1] : in[2];
        })
        .Case([&](math::ErfOp) {
          return unary([](double a) { return std::erf(a); });
        })
        .Case([&](math::TanhOp) {
          return unary([](double a) { return std::tanh(a); });
        })
        .Case([&](math::ExpOp) {
          return unary([](double a) { return std::exp(a); });
        })
        .Case([&](math::SqrtOp) {
          return unary([](double a) { return std::sqrt(a); });
        })
        .Case([&](math::RsqrtOp) {
          return unary([](double a) { return 1 / std::sqrt(a); });
        })
        .Case([&](math::AbsFOp) {
          return unary([](double a) { return std::fabs(a); });
        })
        .Case([&](math::PowFOp) {
          return binary([](double a, double b) { return std::pow(a, b); });
        })
        .Case([&](math::FmaOp) -> std::optional<double> {
          if (in.size() != 3)
            return std::nullopt;
          return in[0] * in[1] + in[2];
        })
        .Default([](Operation *) { return std::nullopt; });
  }

  Block &body;
  llvm::DenseMap<Value, double> values;
};

/// Relative tolerance for a body computing in `type`: what its rounding can
/// explain, far below the differences between the epilogues (gelu_erf and
/// gelu_tanh differ by ~1e-4 relative near |x| = 1).
double toleranceFor(Type type) {
  unsigned mantissa = cast<FloatType>(type).getFPMantissaWidth();
  return std::max(1e-6, 8 * std::ldexp(1.0, -static_cast<int>(mantissa)));
}
} // namespace

std::optional<Epilogue> mlir::linfuse::matchActivation(Operation *op) {
  auto generic = dyn_cast_or_null<linalg::GenericOp>(op);
  if (!generic || !generic.hasPureTensorSemantics() ||
      generic.getNumDpsInputs() != 1 || generic.getNumDpsInits() != 1 ||
      generic.getNumParallelLoops() != generic.getNumLoops() ||
      !llvm::all_of(generic.getIndexingMapsArray(),
                    [](AffineMap m) { return m.isIdentity(); }))
    return std::nullopt;
  Block &body = *generic.getBlock();
  auto inType = dyn_cast<RankedTensorType>(
      generic.getDpsInputOperand(0)->get().getType());
  auto outType = dyn_cast<RankedTensorType>(generic.getResult(0).getType());
  if (!inType || !outType || inType != outType ||
      !isa<FloatType>(inType.getElementType()) ||
      !body.getArgument(1).use_empty())
    return std::nullopt;

  // The narrowest float type in the body bounds how exact it can be.
  double tol = toleranceFor(inType.getElementType());
  for (Operation &inner : body)
    for (Type t : inner.getResultTypes())
      if (isa<FloatType>(t))
        tol = std::max(tol, toleranceFor(t));

  // Points across the shapes of all four functions (negative tails, the
  // kink at 0, the curved region, positive growth), far enough out that a
  // clamped variant (relu6, a saturating silu) or a shifted threshold
  // differs from the real thing somewhere.
  static constexpr double points[] = {-100.0, -30.0, -9.0,  -6.0,   -3.7, -2.0,
                                      -1.1,   -0.5,  -0.03, -0.001, 0.0,  0.001,
                                      0.02,   0.15,  0.4,   1.0,    1.7,  3.3,
                                      6.0,    7.5,   12.0,  40.0,   100.0};
  // A clamp or threshold (min/max or cmpf+select against a constant) agrees
  // with an activation at every fixed sample that misses its breakpoint
  // (relu capped at 150, a relu thresholded at 5e-4), and such a breakpoint
  // is where x meets a value the body has without x: one of its constants,
  // or one it computes from them (100 + 50). Sample on both sides of each
  // such value (and of its negation), and at twice it, where a cap at c is
  // off by half (just past it, a large cap is off by only 0.1%).
  BodyInterpreter interp(body);
  if (!interp.run(0.0))
    return std::nullopt;
  SmallVector<double> breakpoints;
  DenseSet<Value> dependsOnX = {body.getArgument(0)};
  for (Operation &inner : body.without_terminator()) {
    for (Value operand : inner.getOperands()) {
      FloatAttr attr;
      if (matchPattern(operand, m_Constant(&attr)))
        breakpoints.push_back(attr.getValueAsDouble());
    }
    if (llvm::any_of(inner.getOperands(),
                     [&](Value v) { return dependsOnX.contains(v); })) {
      dependsOnX.insert(inner.getResult(0));
      continue;
    }
    if (isa<FloatType>(inner.getResult(0).getType()))
      breakpoints.push_back(interp.valueOf(inner.getResult(0)));
  }
  SmallVector<double> samples(std::begin(points), std::end(points));
  for (double c : breakpoints) {
    if (!std::isfinite(c) || std::fabs(c) > 1e300)
      continue;
    double d = std::max(1e-4, 1e-3 * std::fabs(c));
    for (double v : {c, -c})
      samples.append({v - d, v, v + d, 2 * v});
  }
  // Decades out to the input type's largest value on both sides, for a cap
  // below one of them that the body reaches some other way (x * 1e-31 > 1). Out
  // there an exact activation may fail in the body's own formula (exp(x) / (1 +
  // exp(x)) is inf / inf = NaN): such a point says nothing and is skipped. An
  // infinite result is kept: a real activation of a finite x is finite. And the
  // infinities a GEMM result rounded to a narrow type overflows to, which a
  // clamp to the type's maximum turns back into numbers. Samples the input type
  // cannot hold are dropped.
  double largest =
      APFloat::getLargest(
          cast<FloatType>(inType.getElementType()).getFloatSemantics())
          .convertToDouble();
  size_t fixedSamples = samples.size();
  for (double decade : {1e3, 1e4, 1e5, 1e6, 1e9, 1e15, 1e30, 1e60, 1e100, 1e200,
                        largest, double(INFINITY)})
    samples.append({decade, -decade});
  SmallVector<double> xs, got;
  for (auto [i, x] : llvm::enumerate(samples)) {
    if (std::isfinite(x) && std::fabs(x) > largest)
      continue;
    std::optional<double> y = interp.run(x);
    if (!y)
      return std::nullopt;
    if (std::isnan(*y)) {
      if (i < fixedSamples)
        return std::nullopt;
      continue;
    }
    xs.push_back(x);
    got.push_back(*y);
  }
  std::optional<Epilogue> best;
  double bestErr = tol;
  for (Epilogue e : {Epilogue::Relu, Epilogue::GeluErf, Epilogue::GeluTanh,
                     Epilogue::Silu}) {
    double err = 0;
    for (auto [x, y] : llvm::zip_equal(xs, got)) {
      double ref = evaluateEpilogue(e, x);
      if (std::isinf(ref) || std::isinf(y)) // Only equal infinities agree.
        err = y == ref ? err : INFINITY;
      else
        err = std::max(err, std::fabs(y - ref) / std::max(1.0, std::fabs(ref)));
    }
    if (err <= bestErr) {
      bestErr = err;
      best = e;
    }
  }
  return best;
}
