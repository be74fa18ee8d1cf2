"""JSON export follows its published JSON Schema and carries the frames' numbers."""

from __future__ import annotations

import json

import jsonschema
import pytest
import torch
from torch import nn

import nbinspect
from nbinspect import examples, schema


@pytest.fixture(scope="module")
def validator():
    document_schema = nbinspect.json_schema()
    jsonschema.Draft202012Validator.check_schema(document_schema)
    return jsonschema.Draft202012Validator(document_schema)


def test_export_validates_for_every_zoo_model(zoo_name, validator, tmp_path):
    insp = nbinspect.inspect(examples.build(zoo_name))
    path = tmp_path / "out.json"
    text = insp.to_json(path)
    document = json.loads(path.read_text())
    assert document == json.loads(text) == insp.to_dict()
    validator.validate(document)


def test_schema_documents_every_layer_column():
    documented = set(nbinspect.json_schema()["$defs"]["layer"]["properties"])
    assert documented == set(schema.LAYERS.names) | {"trainable", "tensors"}


def test_export_content_matches_frames():
    model = examples.build("tiny_lm")
    document = nbinspect.inspect(model).to_dict()
    assert document["model"] == {"name": "TinyLM", "framework": "torch"}
    assert document["totals"]["total_params"] == sum(p.numel() for p in model.parameters())
    layers = {r["name"]: r for r in document["layers"]}
    assert [r["index"] for r in document["layers"]] == list(range(len(layers)))
    qkv = layers["blocks.0.attn.qkv"]
    assert qkv["attrs"] == {"in_features": 64, "out_features": 192, "bias": True}
    assert qkv["params"] == 64 * 192 + 192 and qkv["trainable"] == "trainable"
    assert {t["name"]: (t["shape"], t["dtype"]) for t in qkv["tensors"]} == {
        "weight": ([192, 64], "float32"),
        "bias": ([192], "float32"),
    }
    head = layers["lm_head"]["tensors"][0]
    assert head["tied_to"] == "tok_emb.weight"
    assert layers[""]["parent"] is None and layers["blocks.0"]["parent"] == "blocks"
    assert document["input"] is None and layers[""]["output_shapes"] is None  # not traced


def test_export_of_odd_values_is_strict_json(validator):
    model = nn.Sequential(nn.LayerNorm(4, eps=float("inf")), nn.Dropout(float("nan")))
    model.register_buffer("codes", torch.zeros(2, dtype=torch.int8))
    document = json.loads(nbinspect.inspect(model).to_json())  # allow_nan=False would raise
    validator.validate(document)
    attrs = [r["attrs"] for r in document["layers"]]
    assert attrs[1]["eps"] is None and attrs[2]["p"] is None
