"""Dispatches equal but for where their tensors lie and the values of their float
scalars (a quantized transformer's layers: each its own executable, the scales inlined)
share one tiling search (backend.tiling_key): the first is searched for, the others
take its tiling. A dynamic T5 int8 encoder's 51 matmuls were searched for one by one.
A tiling must be plain data that the other dispatch's tiler emits for its own tensors:
the convolution tiler's once held the first dispatch's strategy object, and its program
(its offsets) went to the others, a wrong result where no check caught it."""
import os

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from compiler_target import codegen, compile_file
from compiler_target.codegen import tile_contraction, tile_conv
from tests.e2e.onnx_on_npu import loaded_on_npu, onnx_file, onnxruntime_output

SIZE = 96


def _layers(tmp_path):
    """Three 96x96 matmuls, each scaled by its own constant, then one of 48 columns."""
    rng = np.random.default_rng(0)
    nodes, inits, previous = [], [], "x"
    for i, (columns, scale) in enumerate([(SIZE, 0.5), (SIZE, 0.25), (SIZE, 0.125),
                                          (48, 2.0)]):
        nodes += [helper.make_node("MatMul", [previous, f"w{i}"], [f"m{i}"]),
                  helper.make_node("Mul", [f"m{i}", f"s{i}"], [f"y{i}"])]
        inits += [numpy_helper.from_array((rng.standard_normal((SIZE, columns)) * 0.1)
                                          .astype(np.float32), f"w{i}"),
                  numpy_helper.from_array(np.array(scale, np.float32), f"s{i}")]
        previous = f"y{i}"
    return _saved(tmp_path / "layers.onnx", nodes, inits, (64, SIZE), previous, (64, 48))


def _saved(path, nodes, inits, x_shape, y_name, y_shape):
    graph = helper.make_graph(
        nodes, path.stem, [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
        [helper.make_tensor_value_info(y_name, TensorProto.FLOAT, y_shape)], inits)
    return onnx_file(graph, path, opset=18)


def _searches(monkeypatch, tiler) -> list:
    """The tilers of class `tiler` whose candidates are searched, from now on."""
    searches = []
    search = tiler.candidates
    monkeypatch.setattr(tiler, "candidates", lambda self: searches.append(self) or search(self))
    return searches


def test_equal_layers_are_searched_once(tmp_path, monkeypatch):
    searches = _searches(monkeypatch, tile_contraction.ContractionTiler)
    path = _layers(tmp_path)
    report = tmp_path / "report.txt"
    x = np.random.default_rng(1).standard_normal((64, SIZE)).astype(np.float32)
    with loaded_on_npu(path, "--iree-npu-codegen-jobs=1",
                       f"--iree-npu-dispatch-report={report}") as module:
        result = np.asarray(module.layers(x))
        assert module.last_call_stats.host_dispatches == 0
    assert report.read_text().count("-> npu (") == 4
    assert len(searches) == 2       # the three 96x96 layers once, the 48-column one
    np.testing.assert_allclose(result, onnxruntime_output(path, {"x": x}), rtol=1e-5,
                               atol=1e-5)


def test_a_shared_tiling_gives_the_bytes_of_a_search_each(tmp_path, monkeypatch):
    path = str(_layers(tmp_path))
    shared = compile_file(path, target_backends=["npu"])
    monkeypatch.setattr(codegen.PendingCompile, "key", lambda self: str(id(self)).encode())
    assert compile_file(path, target_backends=["npu"]) == shared


def test_forked_processes_keep_every_stage_for_an_ir_dump(tmp_path):
    """Without an IR dump, a forked process leaves the tile and schedule stages out of
    what it returns (their programs are most of it); with one, every stage is written."""
    dump = tmp_path / "ir"
    compile_file(str(_layers(tmp_path)), target_backends=["npu"],
                 extra_args=["--iree-npu-codegen-jobs=2", f"--iree-npu-dump-ir={dump}"])
    names = sorted(os.listdir(dump))
    assert len(names) == 16
    for stage in ("lower", "tile", "schedule", "emit"):
        assert sum(name.endswith(f".{stage}.mlir") for name in names) == 4
    tiled = next(name for name in names if name.endswith(".tile.mlir"))
    assert "tiles " in (dump / tiled).read_text()


def _convs(tmp_path):
    """Two depthwise and two full 3x3 convolutions of equal shapes, each with its own
    weights and scale, and two equal max pools, each scaled."""
    rng = np.random.default_rng(2)
    nodes, inits, previous = [], [], "x"
    for i, (kind, scale) in enumerate([("dw", 0.5), ("dw", 0.25), ("full", 2.0),
                                       ("full", 0.125), ("pool", 3.0), ("pool", 0.5)]):
        if kind == "pool":
            nodes.append(helper.make_node("MaxPool", [previous], [f"c{i}"], kernel_shape=[3, 3],
                                          pads=[1, 1, 1, 1]))
        else:
            shape, attrs = ((32, 1, 3, 3), {"group": 32}) if kind == "dw" else ((32, 32, 3, 3), {})
            nodes.append(helper.make_node("Conv", [previous, f"w{i}"], [f"c{i}"],
                                          pads=[1, 1, 1, 1], **attrs))
            inits.append(numpy_helper.from_array(
                (rng.standard_normal(shape) * 0.2).astype(np.float32), f"w{i}"))
        nodes.append(helper.make_node("Mul", [f"c{i}", f"s{i}"], [f"y{i}"]))
        inits.append(numpy_helper.from_array(np.array(scale, np.float32), f"s{i}"))
        previous = f"y{i}"
    shape = (1, 32, 40, 40)
    return _saved(tmp_path / "convs.onnx", nodes, inits, shape, previous, shape)


def test_equal_convolutions_and_pools_each_run_their_own_tensors(tmp_path, monkeypatch):
    searches = _searches(monkeypatch, tile_conv.ConvTiler)
    path = _convs(tmp_path)
    x = np.random.default_rng(3).standard_normal((1, 32, 40, 40)).astype(np.float32)
    with loaded_on_npu(path, "--iree-npu-codegen-jobs=1") as module:
        result = np.asarray(module.convs(x))
        assert module.last_call_stats.host_dispatches == 0
    assert len(searches) == 2       # one depthwise, one full convolution
    np.testing.assert_allclose(result, onnxruntime_output(path, {"x": x}), rtol=1e-4,
                               atol=1e-4)
    shared = compile_file(str(path), target_backends=["npu"])
    monkeypatch.setattr(codegen.PendingCompile, "key", lambda self: str(id(self)).encode())
    assert compile_file(str(path), target_backends=["npu"]) == shared
