"""The payload contract: what build_payload makes is what nbinspect/payload_schema.py declares,
and the files generated from it for the front-end (TypeScript types, vitest fixtures) are fresh."""

from __future__ import annotations

import json

import pytest

import nbinspect
from nbinspect import examples, schema
from nbinspect.analyze.views import view_data
from nbinspect.payload_schema import COMPONENT_FIELDS, MODULE_FIELDS, PAYLOAD_VERSION, TENSOR_FIELDS, check_payload
from nbinspect.render.payload import build_payload

from ..generate_contract import FIXTURES, TYPES, dump, payloads, same_json, stale


def _payload(name, framework, totals, frames, sides=None, timeline=None):
    """The payload as a result builds it: the views decided from the frames, then rendered."""
    return build_payload(name, framework, totals, frames, sides, timeline, views=view_data(frames))


@pytest.fixture(scope="module")
def generated() -> dict:
    return payloads()


def test_generated_files_are_fresh():
    old = stale()
    assert not old, f"stale: {[str(p) for p in old]}; run `make contract` (python tests/generate_contract.py)"


def test_fixtures_follow_the_contract_in_every_entry(generated):
    for name, payload in generated.items():
        check_payload(payload, deep=True)
        assert payload["version"] == PAYLOAD_VERSION, name
    traced, compared = generated["tiny_lm"], generated["compare_tiny_lm"]
    assert {"flops", "output_shapes", "stats", "hist"} <= set(traced["modules"])  # every optional part is exercised
    assert "compare" in compared["tensors"] and "note" in generated["cnn"]["modules"]


def test_copied_fields_name_real_frame_columns():
    for fields, frame in ((MODULE_FIELDS, schema.LAYERS), (TENSOR_FIELDS, schema.PARAMS)):
        for f in fields:
            read_from = schema.COMPARE if f.when == "compare" else frame
            assert f.source is None or f.source in read_from.names, f.name
    for f in COMPONENT_FIELDS:
        assert f.source in schema.COMPARE_GROUPS.names, f.name


def test_types_declare_every_field():
    text = TYPES.read_text(encoding="utf-8")
    assert f"export const PAYLOAD_VERSION = {PAYLOAD_VERSION};" in text
    for f in (*MODULE_FIELDS, *TENSOR_FIELDS):
        assert f"  {f.name}{'?' if f.when else ''}: " in text


def test_a_column_the_contract_does_not_declare_is_refused():
    insp = nbinspect.inspect(examples.build("mlp"), stats=False)
    p = _payload(insp.name, insp.framework, insp.totals, insp.frames)
    check_payload(p, deep=True)
    with pytest.raises(ValueError, match=r"payload modules: columns \['health'\] are not declared"):
        check_payload({**p, "modules": {**p["modules"], "health": [0] * len(p["modules"]["key"])}})
    with pytest.raises(ValueError, match=r"required columns \['dtype'\] are missing"):
        check_payload({**p, "tensors": {k: v for k, v in p["tensors"].items() if k != "dtype"}})
    with pytest.raises(ValueError, match="columns differ in length"):
        check_payload({**p, "tensors": {**p["tensors"], "dtype": []}})
    with pytest.raises(ValueError, match=r"payload modules.params\[0\] = 'many' is not num\?"):
        check_payload({**p, "modules": {**p["modules"], "params": ["many", *p["modules"]["params"][1:]]}}, deep=True)
    with pytest.raises(ValueError, match="version 0 is not"):
        check_payload({**p, "version": 0})


def test_staleness_is_detected(generated):
    data = json.loads((FIXTURES / "mlp.json").read_text(encoding="utf-8"))
    assert same_json(data, json.loads(dump(generated["mlp"])))
    changed = json.loads(json.dumps(data))
    changed["modules"]["params"][0] += 1
    assert not same_json(data, changed)  # a count is exact
    noisy = json.loads(json.dumps(data))
    noisy["tensors"]["stats"][0][1] *= 1 + 1e-6
    noisy["tensors"]["hist"][0]["c"][0] += 1
    assert same_json(data, noisy)  # CPU noise in statistics is not staleness
