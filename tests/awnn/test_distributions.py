"""The discretised exponential f(j) and the width D it implies (paper Eq. 11-12)."""
import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from awnn.distributions import importance, importance_from_rho, rate_from_rho, rho_from_rate, width_from_rate

rates = st.floats(min_value=1e-3, max_value=5.0, allow_nan=False)
quantiles = st.floats(min_value=0.01, max_value=0.99)


def cdf(rate: float, width: int) -> float:
    """sum_{j<width} f(j), summed term by term in float64."""
    if width <= 0:
        return 0.0
    return float(importance(torch.tensor(rate, dtype=torch.float64), width).sum())


@pytest.mark.parametrize("rate", [0.005, 0.01, 0.1, 1.0, 3.0])
def test_importance_sums_to_one_over_all_neurons(rate):
    # The tail beyond J neurons is exp(-rate*J); J = 40/rate leaves e^-40.
    f = importance(torch.tensor(rate, dtype=torch.float64), math.ceil(40 / rate))
    assert (f > 0).all()
    assert float(f.sum()) == pytest.approx(1.0, abs=1e-12)


def test_importance_is_strictly_decreasing():
    f = importance(torch.tensor(0.05, dtype=torch.float64), 200)
    assert (f[1:] < f[:-1]).all()
    # f(0) = 1 - e^-rate
    assert float(f[0]) == pytest.approx(-math.expm1(-0.05), rel=1e-12)


@settings(max_examples=200, deadline=None)
@given(rate=rates, k=quantiles)
def test_width_from_rate_is_smallest_width_covering_k(rate, k):
    d = width_from_rate(rate, k)
    assert d >= 1
    # sum_{j<D} f(j) >= k > sum_{j<D-1} f(j) (float sums: 1e-12 slack at the exact boundary)
    assert cdf(rate, d) >= k - 1e-12
    if d > 1:
        assert cdf(rate, d - 1) < k + 1e-12


def test_width_from_rate_matches_design_value():
    # DESIGN.md: k = 0.9 and rate 0.01 give 231 neurons.
    assert width_from_rate(0.01, 0.9) == 231
    # -ln(1-0.75)/ln(2) is exactly 2: ceil must not round float noise up to 3.
    assert width_from_rate(math.log(2.0), 0.75) == 2
    assert width_from_rate(50.0, 0.5) == 1


@pytest.mark.parametrize("k", [0.0, 1.0, -0.1, 1.5])
def test_width_from_rate_rejects_k_outside_open_interval(k):
    with pytest.raises(ValueError, match=r"quantile_k must lie in \(0, 1\)"):
        width_from_rate(0.01, k)


@pytest.mark.parametrize("rate", [0.0, -1.0, float("nan")])
def test_width_from_rate_rejects_non_positive_rate(rate):
    with pytest.raises(ValueError, match="rate must be positive"):
        width_from_rate(rate, 0.9)


@pytest.mark.parametrize("rate", [1e-4, 0.01, 0.5, 3.0, 40.0])
def test_rho_from_rate_inverts_softplus(rate):
    rho = rho_from_rate(rate)
    assert float(rate_from_rho(torch.tensor(rho, dtype=torch.float64))) == pytest.approx(rate, rel=1e-10)


def test_importance_from_rho_matches_importance_of_softplus():
    j = torch.arange(50, dtype=torch.float64)
    for rho0 in [-6.0, -1.0, 0.3, 2.0]:
        rho_a = torch.tensor(rho0, dtype=torch.float64, requires_grad=True)
        rho_b = torch.tensor(rho0, dtype=torch.float64, requires_grad=True)
        w = torch.linspace(-1, 1, 50, dtype=torch.float64)
        fa = importance_from_rho(rho_a, j)
        fb = importance(F.softplus(rho_b), 50)
        torch.testing.assert_close(fa, fb, rtol=1e-12, atol=0)
        (fa * w).sum().backward()
        (fb * w).sum().backward()
        torch.testing.assert_close(rho_a.grad, rho_b.grad, rtol=1e-10, atol=1e-15)


def test_importance_from_rho_passes_gradcheck():
    j = torch.arange(30, dtype=torch.float64)
    rho = torch.tensor(-2.0, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda r: importance_from_rho(r, j), (rho,))
