"""awnn/products.py: the skinny products taken transposed give the products as
written (to float rounding), in every branch of the rule, and write nothing
outside a gradient's view."""
from __future__ import annotations

import pytest
import torch

import awnn.products as products

F64 = torch.float64


@pytest.fixture
def layout_on(monkeypatch):
    monkeypatch.setattr(products, "_ON", True)


def _stack_views(n: int, rows: int, cols: int, pad: int = 5):
    """An (n, rows, cols) view of a flat (n, P) buffer, as the stack's weights and gradients lie."""
    flat = torch.randn(n, rows * cols + 2 * pad, dtype=F64)
    return flat, flat[:, pad : pad + rows * cols].view(-1, rows, cols)


# (slices, batch, width, classes): each branch of the batched rule
READ_OUT_CASES = {
    "one slice, enough work: transposed": (1, 128, 356, 2, True),
    "one slice, little work: as written": (1, 32, 64, 2, False),
    "little work: as written": (4, 32, 64, 2, False),
    "enough work: transposed": (8, 128, 128, 2, True),
    "wide read-out: as written": (8, 128, 128, 10, False),
}


@pytest.mark.parametrize("case", list(READ_OUT_CASES))
def test_stacked_affine_equals_the_product_as_written_in_each_branch(layout_on, case):
    n, b, d, c, expect_transposed = READ_OUT_CASES[case]
    _, w = _stack_views(n, d, c)
    _, bias = _stack_views(n, 1, c)
    h = torch.randn(n, b, d, dtype=F64)
    assert products.stacked_read_out_transposed(h, w) is expect_transposed
    out = products.stacked_affine(bias, h, w)
    assert out.shape == (n, b, c)
    assert out.is_contiguous() is not expect_transposed  # the transposed branch returns a view of (n, c, b)
    torch.testing.assert_close(out, torch.baddbmm(bias, h, w), rtol=1e-12, atol=1e-12)


WEIGHT_GRAD_CASES = {
    "few slices, little work: as written": (2, 8, 64, 2, False),
    "one slice, enough work: transposed": (1, 128, 356, 2, True),
    "four slices, little work: transposed": (4, 32, 16, 2, True),
    "wide: as written": (8, 128, 64, 16, False),
}


@pytest.mark.parametrize("case", list(WEIGHT_GRAD_CASES))
def test_stacked_weight_grad_writes_the_product_into_its_view_only(layout_on, case):
    n, b, d, c, expect_transposed = WEIGHT_GRAD_CASES[case]
    flat, grad = _stack_views(n, d, c)
    before = flat.clone()
    h, g = torch.randn(n, b, d, dtype=F64), torch.randn(n, b, c, dtype=F64)
    assert products.stacked_weight_grad_transposed(h, g) is expect_transposed
    products.stacked_weight_grad_(grad, h, g)
    torch.testing.assert_close(grad, torch.bmm(h.transpose(1, 2), g), rtol=1e-12, atol=1e-12)
    inside = torch.zeros_like(flat, dtype=torch.bool)
    inside[:, 5 : 5 + d * c] = True
    assert torch.equal(flat[~inside], before[~inside])  # the buffer's other entries are untouched


@pytest.mark.parametrize("shape", [(128, 2, 356), (356, 2, 128), (32, 16, 64)])
def test_affine_and_weight_grad_equal_the_products_as_written(layout_on, shape):
    b, out_features, in_features = shape
    x = torch.randn(b, in_features, dtype=F64)
    w = torch.randn(out_features, in_features, dtype=F64)
    bias = torch.randn(out_features, dtype=F64)
    torch.testing.assert_close(products.affine(x, w, bias), x @ w.t() + bias, rtol=1e-12, atol=1e-12)
    g = torch.randn(b, out_features, dtype=F64)
    torch.testing.assert_close(products.weight_grad(g, x, w, 0.0), g.t() @ x, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(products.weight_grad(g, x, w, 0.25), g.t() @ x + 0.25 * w, rtol=1e-12, atol=1e-12)


def test_the_switch_takes_every_product_as_written(monkeypatch):
    monkeypatch.setattr(products, "_ON", False)
    n, b, d, c, _ = READ_OUT_CASES["enough work: transposed"]
    _, w = _stack_views(n, d, c)
    _, bias = _stack_views(n, 1, c)
    assert products.stacked_affine(bias, torch.randn(n, b, d, dtype=F64), w).is_contiguous()
    assert not products.transposed(128, 2, torch.zeros(1))
    monkeypatch.setattr(products, "_ON", True)
    assert products.transposed(128, 2, torch.zeros(1))


def test_the_switch_is_read_from_the_environment(tmp_path):
    import subprocess
    import sys

    code = "import awnn.products as p; print(p._ON)"
    env = {"AWNN_SKINNY_PRODUCTS": "0", "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True, cwd=tmp_path)
    assert out.stdout.strip() == "False"
