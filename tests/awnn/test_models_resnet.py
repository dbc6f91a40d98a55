"""ResNet-20 with a fixed or adaptive classifier: shapes, learning, resizing."""
import pytest
import torch
import torch.nn.functional as F

from awnn.config import TrainConfig
from awnn.layers import AdaptiveMLP, FixedMLP, adaptive_modules, named_model_widths
from awnn.models import build_model
from awnn.models.resnet import BasicBlock, ResNet20


class FakeImages:
    kind = "image"
    in_channels = 3
    num_classes = 5


def make(model="awnn", **kw):
    torch.manual_seed(0)
    cfg = TrainConfig.from_dict({"task": "digits", "model": model, "activation": "leaky_relu", "rate": 0.2, **kw})
    return build_model(cfg, FakeImages())


def test_resnet20_has_the_cifar_architecture():
    net = ResNet20(3, FixedMLP(64, 10, hidden_layers=0))
    blocks = [m for m in net.modules() if isinstance(m, BasicBlock)]
    assert len(blocks) == 9  # 3 stages x 3 blocks; + stem + classifier = 20 layers
    convs = sum(p.numel() for n, p in net.named_parameters() if "head" not in n)
    assert 0.26e6 < convs < 0.28e6  # He et al.: 0.27M parameters (option-A shortcuts)


@pytest.mark.parametrize(
    "model, kw, widths, names",
    [
        ("fixed", {"width": 0}, [], []),
        ("fixed", {"width": 32}, [32], ["head"]),
        ("awnn", {}, [13], ["head"]),  # rate 0.2, k 0.9: floor(ln 10 / 0.2) + 2 = 13 (authors profile; paper-text: ceil = 12)
    ],
)
def test_resnet20_output_shape_and_head_widths(model, kw, widths, names):
    net = make(model, **kw)
    out = net(torch.randn(4, 3, 32, 32))
    assert out.shape == (4, 5)
    assert net(torch.randn(2, 3, 8, 8)).shape == (2, 5)  # any size: global average pooling
    assert net.widths == widths
    assert list(named_model_widths(net)) == names
    assert isinstance(net.head, AdaptiveMLP if model == "awnn" else FixedMLP)
    assert len(adaptive_modules(net)) == (model == "awnn")


@pytest.mark.parametrize("model", ["fixed", "awnn"])
def test_resnet20_a_few_steps_reduce_the_loss(model):
    net = make(model, width=32)
    torch.manual_seed(1)
    x, y = torch.randn(16, 3, 8, 8), torch.randint(0, 5, (16,))
    opt = torch.optim.Adam(net.parameters(), lr=1e-2)
    blocks = adaptive_modules(net)
    losses = []
    for _ in range(15):
        for b in blocks:
            b.update_width(opt)
        loss = F.cross_entropy(net(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    assert losses[-1] < 0.5 * losses[0]


def test_resnet20_resizing_the_head_keeps_optimiser_state():
    net = make("awnn", reset_optimizer_on_resize=False)  # the keep-state path (the authors profile resets it: tests/awnn/test_profiles.py)
    opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
    x, y = torch.randn(8, 3, 8, 8), torch.randint(0, 5, (8,))
    for _ in range(3):
        loss = F.cross_entropy(net(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    head = net.head
    w_in, w_out = head.layers[0].weight, head.layers[1].weight
    ids = [id(p) for p in net.parameters()]
    m_in, m_out = opt.state[w_in]["momentum_buffer"].clone(), opt.state[w_out]["momentum_buffer"].clone()
    old = head.widths[0]
    head.set_widths([old + 5], opt)  # grow
    assert [id(p) for p in net.parameters()] == ids  # same Parameter objects
    assert opt.state[w_in]["momentum_buffer"].shape == (old + 5, 64)
    assert torch.equal(opt.state[w_in]["momentum_buffer"][:old], m_in)
    assert torch.equal(opt.state[w_out]["momentum_buffer"][:, :old], m_out)
    assert not opt.state[w_in]["momentum_buffer"][old:].any()  # new neurons: no history
    head.set_widths([old - 4], opt)  # shrink
    assert torch.equal(opt.state[w_in]["momentum_buffer"], m_in[: old - 4])
    loss = F.cross_entropy(net(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    assert torch.isfinite(loss)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_resnet20_trains_on_the_gpu():
    net = make("awnn").cuda()
    opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
    x, y = torch.randn(8, 3, 32, 32, device="cuda"), torch.randint(0, 5, (8,), device="cuda")
    for _ in range(3):
        net.head.update_width(opt)
        loss = F.cross_entropy(net(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert loss.is_cuda and torch.isfinite(loss)
