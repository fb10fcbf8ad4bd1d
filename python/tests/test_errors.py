"""Every non-OK status raises the exception of its status, carrying nncl_last_error's message;
closed objects and refused arguments say so."""
import gc
import weakref

import numpy as np
import pytest

import nncl
from nncl import graph as graph_mod


def xor(ctx, max_batch=4):
    g = nncl.Graph(ctx, seed=1)
    x, y = g.input("x", (2,)), g.input("y")
    logits = g.linear(g.linear(x, 8, act="tanh", name="fc1"), 2, name="fc2")
    return nncl.Trainer(g, g.softmax_cross_entropy(logits, y), lr=0.05, max_batch=max_batch), x, y


def test_step_refusal_carries_the_c_message(ctx):
    t, x, y = xor(ctx)
    X = np.zeros((4, 2), np.float32)
    with pytest.raises(nncl.InvalidArgumentError) as e:
        t.step({x: X, y: np.array([0, 1, 5, 0], np.float32)})  # class 5 of 2
    err = e.value
    assert str(err) == err.message == nncl.last_error(ctx) == ctx.last_error
    assert '"y"' in str(err) and "5" in str(err)
    assert err.status == -1 and err.status_name == "invalid argument" and err.function == "nncl_trainer_step"
    assert isinstance(err, ValueError) and isinstance(err, nncl.NNCLError)
    assert t.step_count == 0  # a bad feed changes nothing
    with pytest.raises(nncl.InvalidArgumentError, match="max_batch|batch"):
        t.step({x: np.zeros((5, 2)), y: np.zeros(5)})


def test_file_and_format_errors():
    with pytest.raises(nncl.FileError) as e:
        nncl.Dataset.load_idx("/no/such/images", "/no/such/labels")
    assert "/no/such/" in str(e.value) and str(e.value) == nncl.last_error()
    assert isinstance(e.value, OSError) and e.value.status == -7
    with pytest.raises(nncl.FormatError) as e:
        nncl.SafeTensors.parse(b"\x08\x00\x00\x00\x00\x00\x00\x00{broken}", "mem.safetensors")
    assert "mem.safetensors" in str(e.value) and str(e.value) == nncl.last_error()
    with pytest.raises(nncl.FormatError, match="line 3"):
        nncl.parse_csv("a,label\n1,x\nzz,y\n", "t.csv")


def test_no_device_error():
    with pytest.raises(nncl.NoDeviceError) as e:
        nncl.init(devices="no-such-device-name")
    assert "no-such-device-name" in str(e.value) and e.value.function == "nncl_init"


def test_state_error_of_a_description_only_model(ctx, tmp_path):
    t, x, y = xor(ctx)
    t.save_model(tmp_path / "m.safetensors")
    m = nncl.Model.from_safetensors(tmp_path / "m.safetensors")  # no context: description only
    assert m.features == 2 and m.classes == 2 and m.trainer is None
    with pytest.raises(nncl.StateError):
        m.predict(np.zeros((1, 2)))


def test_closed_objects_raise_state_error(ctx):
    t, x, y = xor(ctx)
    t.close()
    assert t.closed
    with pytest.raises(nncl.StateError, match="closed"):
        t.predict({x: np.zeros((1, 2))})
    t.close()  # twice is fine
    with nncl.Curve() as c:
        assert len(c) == 0
    with pytest.raises(nncl.StateError):
        len(c)


def test_a_builder_the_library_lacks_raises_unsupported(ctx):
    method = graph_mod._builder("nope", "nncl_no_such_builder", "x:node k:int=1", "", "")
    g = nncl.Graph(ctx)
    with pytest.raises(nncl.UnsupportedError, match="nncl_no_such_builder"):
        method(g, g.input("x", (2,)))


def test_unknown_options_are_refused(ctx):
    g = nncl.Graph(ctx)
    x = g.input("x", (2,))
    loss = g.mse(g.linear(x, 2, name="l"), g.input("y", (2,)))
    with pytest.raises(TypeError, match="momentun"):
        nncl.Trainer(g, loss, optimizer="sgd", momentun=0.9)
    with pytest.raises(ValueError, match="optimizer"):
        nncl.Trainer(g, loss, optimizer="lamb")
    with pytest.raises(ValueError, match="precision"):
        nncl.Trainer(g, loss, precision="fp8")


def test_a_trainer_keeps_its_graph_and_context_alive():
    c = nncl.init()
    t, x, y = xor(c)
    refs = [weakref.ref(c), weakref.ref(t.graph)]
    del c
    gc.collect()
    assert all(r() is not None for r in refs)
    assert np.isfinite(t.step({x: np.zeros((4, 2)), y: np.zeros(4)}))
    del t, x, y
    gc.collect()
    assert all(r() is None for r in refs)  # freed after the trainer, not leaked


def test_the_log_callback_receives_the_messages():
    msgs = []
    c = nncl.init(log=lambda level, message: msgs.append((level, message)), log_level="info")
    t, x, y = xor(c)
    with pytest.raises(nncl.InvalidArgumentError) as e:
        t.step({x: np.zeros((4, 2)), y: np.full(4, 7.0)})
    assert (0, str(e.value)) in msgs  # errors reach the log at level 0 (error)


def test_threads_step_one_trainer_at_once(ctx):
    import threading
    t, x, y = xor(ctx)
    X, Y = np.array([[0, 0], [0, 1], [1, 0], [1, 1]], np.float32), np.array([0, 1, 1, 0], np.float32)
    errors = []

    def run():
        try:
            for _ in range(50):
                assert np.isfinite(t.step({x: X, y: Y}))
        except Exception as e:  # reported below
            errors.append(e)
    threads = [threading.Thread(target=run) for _ in range(2)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors and t.step_count == 100
