"""Element-wise code on the host: activations computed with polynomial
approximations (--linfuse-approximate-math) and reassociated sums
(--linfuse-reassociate-reductions) stay as accurate as PyTorch's own
vectorized kernels, over the whole f32 range, with inf/nan handled."""

import pytest
import torch

import linfuse.torch as lt

# Every 0.001 over [-100, 100], then the edges of exp's range and specials.
X = torch.cat([
    torch.linspace(-100, 100, 200001),
    torch.tensor([0.0, -0.0, 1e-30, -1e-30, 1e-45, 88.0, -88.0, 88.8, -103.9,
                  float("inf"), float("-inf"), float("nan")]),
]).reshape(1, -1)

ACTIVATIONS = {
    "silu": torch.nn.functional.silu,
    "sigmoid": torch.sigmoid,
    "tanh": torch.tanh,
    "exp": torch.exp,
    "gelu": torch.nn.functional.gelu,
    "gelu_tanh": lambda t: torch.nn.functional.gelu(t, approximate="tanh"),
}


class _Apply(torch.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, x):
        return self.fn(x)


@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_activation_matches_float64(name):
    fn = ACTIVATIONS[name]
    got = lt.compile(_Apply(fn), (X,), strict=True)(X)
    ref = fn(X.double()).float().double()  # float64, rounded to float32
    eager = fn(X).double()
    finite = torch.isfinite(ref)
    # Non-finite results (inf from exp's overflow, nan from nan) exactly.
    assert torch.equal(got[~finite].double().nan_to_num(), ref[~finite].nan_to_num())
    # Error relative to the magnitude, with an absolute floor where the
    # function cancels to ~0 (GELU near -5): within 4x eager PyTorch's.
    def err(y):
        return ((y.double() - ref).abs() / (ref.abs() + 1e-6))[finite].max().item()
    assert err(got) <= max(4 * err(eager), 1e-6), (err(got), err(eager))
    assert (got.double() - ref).abs()[finite].max().item() <= 2e-6 * max(1.0, ref[finite].abs().max().item())


def test_reassociated_mean_is_accurate():
    # RMSNorm's mean of squares over 4096: a vectorized (reassociated) sum
    # must be as close to the float64 sum as PyTorch's.
    class RMSNorm(torch.nn.Module):
        def forward(self, x):
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)
    torch.manual_seed(0)
    x = torch.randn(64, 4096) * torch.logspace(-3, 3, 64).reshape(64, 1)
    got = lt.compile(RMSNorm(), (x,), strict=True)(x).double()
    ref = RMSNorm()(x.double())
    eager = RMSNorm()(x).double()
    assert (got - ref).abs().max().item() <= max(2 * (eager - ref).abs().max().item(), 1e-6)
