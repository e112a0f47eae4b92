"""learning.flower.wire: a model over flwr's own chunk size (5 MiB) travels in parts of at most
that size, each its own object, and arrives whole; a part that is missing is refused naming
the model."""

import numpy as np
import pytest

pytest.importorskip("flwr")

from flwr.app import ConfigRecord, Message, RecordDict
from flwr.supercore.inflatable.inflatable_object import get_all_nested_objects
from flwr.supercore.task_identity import TaskIdentity

from learning.flower.wire import (
    CONFIG,
    MODEL,
    PART,
    PARTS,
    REPLY,
    content,
    model_bytes,
    model_from,
    unpack,
)


@pytest.fixture(autouse=True)
def _task_identity():
    old = (TaskIdentity._run_id, TaskIdentity._task_id, TaskIdentity._node_id)
    TaskIdentity.run_id, TaskIdentity.task_id, TaskIdentity.node_id = 1, 1, 0
    yield
    TaskIdentity._run_id, TaskIdentity._task_id, TaskIdentity._node_id = old


def _objects(record_dict: RecordDict) -> list[int]:
    """The sizes in bytes of the objects flwr moves for a message with this content."""
    msg = Message(record_dict, dst_node_id=5, message_type="train")
    return [len(o.deflate()) for o in get_all_nested_objects(msg).values()]


def test_flwrs_chunk_size_is_five_mib():
    assert PART == 5 * 2**20


@pytest.mark.parametrize("params,objects", [(PART // 4 - 1, 3), (PART // 4, 3),
                                            (PART // 4 + 1, 4), (2 * PART // 4 + 3, 5)])
def test_a_model_travels_in_objects_of_at_most_flwrs_chunk_size(params, objects):
    model = np.random.default_rng(params).normal(size=params).astype(np.float32)
    for key in (CONFIG, REPLY):
        sent = content(key, {"server-round": 3, "prox": 0.1}, model=model)
        sizes = _objects(sent)
        assert len(sizes) == objects
        parts = [sent[name][MODEL] for name in sent]  # the model's bytes each record holds
        assert len(parts) == objects - 2 and max(len(p) for p in parts) <= PART
        assert max(sizes) <= PART + 128  # a part and its record's few bytes
        values, data = unpack(sent, key)
        assert values == {"server-round": 3, "prox": 0.1}
        assert data == model_bytes(model)
        np.testing.assert_array_equal(model_from(data, params), model.astype(np.float64))
    # known bad: the whole model in the one record (the former layout) is one object of all
    # its bytes
    whole = RecordDict({CONFIG: ConfigRecord({MODEL: model_bytes(model)})})
    assert len(_objects(whole)) == 3
    assert (len(whole[CONFIG][MODEL]) > PART) == (params > PART // 4)
    assert (max(_objects(whole)) > PART + 128) == (params > PART // 4 + 32)


def test_a_model_with_a_part_missing_or_a_bad_count_is_refused_naming_the_model():
    model = np.arange(11, dtype=np.float32)
    sent = content(CONFIG, {"round": 1}, model=model, part=16)  # 44 bytes: parts 2 to 3
    assert sent[CONFIG][PARTS] == 3 and sorted(sent) == [CONFIG, "model-2", "model-3"]
    np.testing.assert_array_equal(model_from(unpack(sent, CONFIG)[1]), model)
    del sent["model-3"]
    with pytest.raises(ValueError, match=r"^model: part 3 of 3 is missing$"):
        unpack(sent, CONFIG)
    for bad in (1, 2.0, "3", True):
        record = dict(content(CONFIG, {}, model=model, part=16)[CONFIG])
        record[PARTS] = bad
        with pytest.raises(ValueError, match=r"^model: .* parts announced"):
            unpack(RecordDict({CONFIG: ConfigRecord(record)}), CONFIG)


def test_the_models_keys_are_not_values_and_a_part_is_whole_float32_values():
    for name in (MODEL, PARTS):
        with pytest.raises(ValueError, match=f"'{name}' is the model's key"):
            content(CONFIG, {name: 1}, model=[1.0])
    for part in (0, 6, -4):
        with pytest.raises(ValueError, match=r"^part: is .*; must be a positive multiple of 4"):
            content(CONFIG, {}, model=[1.0], part=part)
