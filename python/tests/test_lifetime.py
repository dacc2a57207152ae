"""C objects are freed deterministically and in any order without crashing."""

import gc

import numpy as np
import pytest

import rlx


def _graph():
    g = rlx.Graph()
    x = g.input("x", "f32", [2])
    g.set_outputs(x * 3.0)
    return g


def test_graph_deleted_before_exec_runs():
    g = _graph()
    exe = g.compile("cpu")
    del g
    gc.collect()
    np.testing.assert_array_equal(exe.run(x=np.ones(2, np.float32))[0], [3, 3])


def test_graph_closed_before_exec_runs_and_clones():
    g = _graph()
    exe = g.compile("cpu")
    g.close()
    twin = exe.clone()
    exe.close()
    np.testing.assert_array_equal(twin.run(x=np.ones(2, np.float32))[0], [3, 3])
    twin.close()


def test_closed_objects_raise_instead_of_crashing():
    g = _graph()
    x = g.inputs[0].tensor
    exe = g.compile("cpu")
    g.close()
    g.close()  # twice is fine
    assert g.closed and "closed" in repr(x)
    with pytest.raises(ValueError, match="closed"):
        x + 1.0
    with pytest.raises(ValueError, match="closed"):
        g.to_text()
    exe.close()
    exe.close()
    with pytest.raises(ValueError, match="closed"):
        exe.run(x=np.ones(2, np.float32))
    with pytest.raises(ValueError, match="closed"):
        exe.clone()


def test_tensors_keep_their_graph_alive():
    def build():
        g = rlx.Graph()
        return g.input("x", "f32", [2])  # only the tensor escapes
    x = build()
    gc.collect()
    y = (x + 1.0).relu()
    x.graph.set_outputs(y)
    exe = x.graph.compile("cpu")
    np.testing.assert_array_equal(exe.run(x=np.array([-5, 1], np.float32))[0], [0, 2])


def test_context_managers_close():
    with _graph() as g:
        with g.compile("cpu") as exe:
            pass
        assert exe.closed
    assert g.closed


def test_many_objects_collected():
    for _ in range(200):
        g = _graph()
        exe = g.compile("cpu")
        exe.clone()
        del g, exe
    gc.collect()


def test_input_buffer_is_copied():
    with _graph() as g, g.compile("cpu") as exe:
        x = np.ones(2, np.float32)
        exe.set_input("x", x)
        x[:] = 100  # rlx copied the data at set_input
        del x
        gc.collect()
        np.testing.assert_array_equal(exe.run()[0], [3, 3])


def test_non_contiguous_arrays():
    with rlx.Graph() as g:
        x = g.input("x", "f32", [3, 2])
        g.set_outputs(x + 0.0)
        exe = g.compile("cpu")
    a = np.arange(6, dtype=np.float32).reshape(2, 3).T  # a Fortran-order view
    np.testing.assert_array_equal(exe.run(x=a)[0], a)
