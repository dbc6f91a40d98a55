"""Transformer with fixed or adaptive feed-forward blocks: shapes, masks,
learning, resizing inside an encoder/decoder layer."""
import pytest
import torch
import torch.nn.functional as F

from awnn.config import TrainConfig
from awnn.layers import adaptive_modules, named_model_widths
from awnn.models import build_model

PAD = 0


class FakeText:
    kind = "text"
    num_classes = in_features = 12  # vocabulary
    pad_id = PAD
    max_len = 16


def make(model="awnn", **kw):
    torch.manual_seed(0)
    cfg = TrainConfig.from_dict(
        {"task": "multi30k", "model": model, "rate": 0.2, "width": 24, "d_model": 16, "heads": 2, "encoder_layers": 2, "decoder_layers": 2, "dropout": 0.0, **kw}
    )
    return build_model(cfg, FakeText())


def copy_batch(n=8, t=6, seed=0):
    g = torch.Generator().manual_seed(seed)
    body = torch.randint(3, 12, (n, t), generator=g)
    src = torch.cat([torch.full((n, 1), 1), body, torch.full((n, 1), 2)], 1)  # <bos> body <eos>
    return (src, src[:, :-1]), src[:, 1:]


@pytest.mark.parametrize("model, widths", [("fixed", [24] * 4), ("awnn", [13] * 4)])  # rate 0.2: floor(ln 10 / 0.2) + 2 (authors profile)
def test_transformer_output_shape_and_named_widths(model, widths):
    net = make(model)
    (src, tgt_in), _ = copy_batch()
    assert net((src, tgt_in)).shape == (8, 7, 12)
    assert net.widths == widths
    assert list(named_model_widths(net)) == ["enc0_ffn", "enc1_ffn", "dec0_ffn", "dec1_ffn"]
    assert len(adaptive_modules(net)) == (4 if model == "awnn" else 0)


def test_transformer_is_causal_and_ignores_padding():
    net = make("awnn").eval()
    (src, tgt_in), _ = copy_batch(n=2)
    with torch.no_grad():
        out = net((src, tgt_in))
        changed = tgt_in.clone()
        changed[:, 4:] = 5  # later target tokens cannot change earlier predictions
        assert torch.allclose(net((src, changed))[:, :4], out[:, :4], atol=1e-5)
        padded = net((F.pad(src, (0, 3), value=PAD), F.pad(tgt_in, (0, 2), value=PAD)))
        assert torch.allclose(padded[:, : tgt_in.shape[1]], out, atol=1e-5)


@pytest.mark.parametrize("model", ["fixed", "awnn"])
def test_transformer_a_few_steps_reduce_the_loss(model):
    net = make(model)
    x, y = copy_batch()
    opt = torch.optim.Adam(net.parameters(), lr=1e-2)
    blocks = adaptive_modules(net)
    losses = []
    for _ in range(40):
        for b in blocks:
            b.update_width(opt)
        loss = F.cross_entropy(net(x).reshape(-1, 12), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    assert losses[-1] < 0.5 * losses[0]


def test_transformer_resizing_a_decoder_ffn_keeps_optimiser_state():
    net = make("awnn", reset_optimizer_on_resize=False)  # the keep-state path (the authors profile resets it: tests/awnn/test_profiles.py)
    x, y = copy_batch()
    opt = torch.optim.Adam(net.parameters(), lr=1e-2)
    for _ in range(3):
        loss = F.cross_entropy(net(x).reshape(-1, 12), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
    ffn = net.decoder[1].ffn.mlp
    w_out = ffn.layers[1].weight  # (d_model, hidden): columns belong to hidden neurons
    ids = [id(p) for p in net.parameters()]
    m = opt.state[w_out]["exp_avg"].clone()
    old = ffn.widths[0]
    ffn.set_widths([old + 9], opt)
    assert [id(p) for p in net.parameters()] == ids
    assert named_model_widths(net)["dec1_ffn"] == old + 9
    assert torch.equal(opt.state[w_out]["exp_avg"][:, :old], m)
    assert not opt.state[w_out]["exp_avg"][:, old:].any()
    loss = F.cross_entropy(net(x).reshape(-1, 12), y.reshape(-1))
    opt.zero_grad()
    loss.backward()
    opt.step()
    assert torch.isfinite(loss)


def test_transformer_rejects_sequences_longer_than_max_len():
    net = make("fixed", max_len=8)
    src = torch.ones(1, 20, dtype=torch.long)
    with pytest.raises(ValueError, match="max_len"):
        net((src, src))


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_transformer_trains_on_the_gpu():
    net = make("awnn").cuda()
    (src, tgt_in), y = copy_batch()
    x, y = (src.cuda(), tgt_in.cuda()), y.cuda()
    opt = torch.optim.Adam(net.parameters(), lr=1e-2)
    for _ in range(3):
        for b in adaptive_modules(net):
            b.update_width(opt)
        loss = F.cross_entropy(net(x).reshape(-1, 12), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert loss.is_cuda and torch.isfinite(loss)
