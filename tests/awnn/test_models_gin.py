"""GIN with fixed or adaptive MLPs: shapes, learning, resizing inside convolutions."""
import pytest
import torch
import torch.nn.functional as F

pytest.importorskip("torch_geometric", reason="the graph models need torch-geometric")
from torch_geometric.data import Batch, Data  # noqa: E402

from awnn.config import TrainConfig  # noqa: E402
from awnn.layers import AdaptiveMLP, adaptive_modules, named_model_widths  # noqa: E402
from awnn.models import build_model  # noqa: E402


class FakeGraphs:
    kind = "graph"
    in_features = 3
    num_classes = 2


def ring_or_path(n: int, ring: bool) -> Data:
    edges = [(i, i + 1) for i in range(n - 1)] + ([(n - 1, 0)] if ring else [])
    ei = torch.tensor(edges + [(b, a) for a, b in edges], dtype=torch.long).t()
    return Data(x=torch.ones(n, 3), edge_index=ei, y=torch.tensor([int(ring)]))


def batch():
    return Batch.from_data_list([ring_or_path(n, ring) for n in (4, 5, 6, 7) for ring in (False, True)])


def make(model="awnn", **kw):
    torch.manual_seed(0)
    cfg = TrainConfig.from_dict({"task": "nci1", "model": model, "rate": 0.2, "width": 16, "conv_layers": 2, **kw})
    return build_model(cfg, FakeGraphs())


@pytest.mark.parametrize("pooling", ["sum", "mean"])
@pytest.mark.parametrize("model, widths", [("fixed", [16, 16, 16]), ("awnn", [13, 13, 13])])  # rate 0.2, k 0.9: floor(ln 10 / 0.2) + 2 = 13 (the authors profile; paper-text: ceil = 12)
def test_gin_output_shape_and_named_widths(model, widths, pooling):
    net = make(model, pooling=pooling)
    b = batch()
    assert net(b).shape == (b.num_graphs, 2)
    assert net.widths == widths
    assert list(named_model_widths(net)) == ["input", "conv0", "conv1"]
    blocks = adaptive_modules(net)
    assert len(blocks) == (3 if model == "awnn" else 0)
    if model == "awnn":  # the MLP before the convolutions and the one inside each convolution
        assert blocks[0] is net.input_mlp and [c.nn for c in net.convs] == blocks[1:]


def test_gin_embedding_size_between_convolutions():
    assert make("fixed", width=32).convs[0].nn.layers[0].in_features == 32  # embed_dim 0: width
    assert make("awnn").convs[0].nn.in_features == 64  # embed_dim 0: 64 for AWNN
    assert make("awnn", embed_dim=24).convs[0].nn.in_features == 24
    with pytest.raises(ValueError, match="embed_dim"):
        make("fixed", width=0)


@pytest.mark.parametrize("model", ["fixed", "awnn"])
def test_gin_a_few_steps_reduce_the_loss(model):
    net = make(model)
    b = batch()
    opt = torch.optim.Adam(net.parameters(), lr=1e-2)
    blocks = adaptive_modules(net)
    losses = []
    for _ in range(30):
        for blk in blocks:
            blk.update_width(opt)
        loss = F.cross_entropy(net(b), b.y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    assert losses[-1] < 0.5 * losses[0]


def test_gin_resizing_a_convolution_mlp_keeps_optimiser_state():
    net = make("awnn", reset_optimizer_on_resize=False)  # the keep-state path (the authors profile resets it: tests/awnn/test_profiles.py)
    b = batch()
    opt = torch.optim.Adam(net.parameters(), lr=1e-2)
    for _ in range(3):
        loss = F.cross_entropy(net(b), b.y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    mlp: AdaptiveMLP = net.convs[1].nn
    w = mlp.layers[0].weight
    ids = [id(p) for p in net.parameters()]
    m, v = opt.state[w]["exp_avg"].clone(), opt.state[w]["exp_avg_sq"].clone()
    old = mlp.widths[0]
    mlp.set_widths([old + 6], opt)
    assert [id(p) for p in net.parameters()] == ids
    assert net.widths[2] == old + 6 and named_model_widths(net)["conv1"] == old + 6
    assert torch.equal(opt.state[w]["exp_avg"][:old], m) and torch.equal(opt.state[w]["exp_avg_sq"][:old], v)
    assert not opt.state[w]["exp_avg"][old:].any()
    loss = F.cross_entropy(net(b), b.y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    assert torch.isfinite(loss)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_gin_trains_on_the_gpu():
    net = make("awnn").cuda()
    b = batch().to("cuda")
    opt = torch.optim.Adam(net.parameters(), lr=1e-2)
    for _ in range(3):
        for blk in adaptive_modules(net):
            blk.update_width(opt)
        loss = F.cross_entropy(net(b), b.y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert loss.is_cuda and torch.isfinite(loss)


_BUILD_A_GIN_AND_RAISE_IN_ITS_PROPAGATE = r"""
import inspect, sys, traceback
import torch
sys.path.insert(0, sys.argv[1])
from test_models_gin import batch, make
net = make("awnn")
assert net(batch()).shape == (8, 2)                      # the generated propagate runs
mod = next(m for n, m in sys.modules.items() if n.startswith("torch_geometric") and n.endswith("_propagate"))
print("SOURCE", "def propagate" in inspect.getsource(mod))  # its source is still there, in memory
try:
    net.convs[0](torch.ones(3, 64), torch.tensor([[0, 5], [1, 0]]))  # node 5 of 3: an error inside propagate
except Exception:
    print("TRACEBACK", mod.__file__ in traceback.format_exc(), "kwargs = self.collect(" in traceback.format_exc())
"""


def test_building_a_gin_leaves_no_file_in_the_temporary_folder_and_its_generated_source_stays_readable(tmp_path):
    """PyG renders GINConv's propagate into a .py file of the temporary folder and never removes it (one per
    process); awnn.data.graphs.pyg_sources_in_memory keeps the source in linecache and removes the file: a fresh
    process (PyG writes the file once per process) with TMPDIR a folder of the test's own."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    scratch = tmp_path / "tmp"
    scratch.mkdir()
    script = tmp_path / "build.py"
    script.write_text(_BUILD_A_GIN_AND_RAISE_IN_ITS_PROPAGATE)
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "TMPDIR": str(scratch), "PYTHONPATH": str(root) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    out = subprocess.run([sys.executable, str(script), str(Path(__file__).parent)], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "SOURCE True" in out.stdout
    assert "TRACEBACK True True" in out.stdout, out.stdout  # the traceback names the file and shows its line
    assert sorted(p.name for p in scratch.iterdir()) == []
