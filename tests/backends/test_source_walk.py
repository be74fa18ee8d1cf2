"""from_module's walk against torch's own walk: paths, owners, kinds, aliases, the path limit."""

import pytest
import torch
from torch import nn

from nbinspect.backends import as_source
from nbinspect.backends.torch import source as torch_source


def _models() -> dict[str, nn.Module]:
    shared = nn.Linear(2, 2)
    mixed = nn.Sequential(nn.Linear(3, 3), nn.BatchNorm1d(3), nn.Linear(3, 3), nn.LayerNorm(3))
    mixed[0].register_buffer("scale", torch.ones(3))  # a buffer after parameters, then parameters again
    mixed[2].weight.requires_grad_(False)
    mixed[3].register_buffer("grad_buffer", torch.ones(3, requires_grad=True))  # a buffer's requires_grad: False
    root = nn.Linear(2, 2)  # tensors of the root itself: no dotted prefix
    root.register_buffer("b", torch.zeros(2))
    return {
        "mixed": mixed,
        "aliased": nn.Sequential(shared, nn.ReLU(), shared, nn.Sequential(shared)),
        "root": root,
        "nested": nn.Sequential(nn.Sequential(nn.Sequential(nn.Linear(1, 1))), nn.GRU(2, 2)),
        "half": nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 2).half()),  # two dtypes
    }


@pytest.mark.parametrize("name", list(_models()))
def test_the_walk_is_torchs_walk(name):
    model = _models()[name]
    expected_modules, expected_tensors, first = [], [], {}
    for path, module in model.named_modules(remove_duplicate=False):
        at = first.setdefault(id(module), path)
        expected_modules.append((path, type(module).__name__, at if at != path else None))
        prefix = f"{path}." if path else ""
        for kind, table in (("parameter", module._parameters), ("buffer", module._buffers)):
            for local, t in table.items():
                if t is not None:
                    grad = kind == "parameter" and t.requires_grad
                    expected_tensors.append((prefix + local, path, kind, grad, t.dtype.itemsize * t.numel()))
    source = as_source(model)
    assert [(m.name, m.type, m.alias_of) for m in source.modules] == expected_modules
    assert [(t.name, t.module, t.kind, t.requires_grad, t.nbytes) for t in source.tensors] == expected_tensors


def test_more_module_paths_than_the_limit_are_refused(monkeypatch):
    shared = nn.Linear(1, 1)
    model = nn.Sequential(*[nn.Sequential(shared, shared) for _ in range(2)])  # 1 + 2 + 4 paths
    monkeypatch.setattr(torch_source, "MAX_MODULE_PATHS", 7)
    assert len(as_source(model).modules) == 7
    monkeypatch.setattr(torch_source, "MAX_MODULE_PATHS", 6)
    with pytest.raises(ValueError, match="more than 6 module paths"):
        as_source(model)
