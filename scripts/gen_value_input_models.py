#!/usr/bin/python3
"""Writes the small ONNX models of tests/data/onnx/ that test shape-valued
graph inputs handled at run time (tests/test_onnx_value_inputs.c,
python/tests/test_onnx.py). Run with Debian's python (onnx 1.12):

    /usr/bin/python3 scripts/gen_value_input_models.py

value_params.onnx: y = Reshape(MatMul(x, W) + b, shape), W and b
initializers (params), x f32[2,3] and shape i64[2] graph inputs; y is
declared f32 of rank 2 with unnamed dims (they depend on `shape`).
"""
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "onnx")


def value_params():
    w = numpy_helper.from_array(np.arange(12, dtype=np.float32).reshape(3, 4) / 4, "W")
    b = numpy_helper.from_array(np.array([1, -1, 2, -2], dtype=np.float32), "b")
    nodes = [
        helper.make_node("MatMul", ["x", "W"], ["xw"]),
        helper.make_node("Add", ["xw", "b"], ["xwb"]),
        helper.make_node("Reshape", ["xwb", "shape"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes, "value_params",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3]),
         helper.make_tensor_value_info("shape", TensorProto.INT64, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, None])],
        initializer=[w, b])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def main():
    os.makedirs(OUT, exist_ok=True)
    onnx.save(value_params(), os.path.join(OUT, "value_params.onnx"))


if __name__ == "__main__":
    main()
