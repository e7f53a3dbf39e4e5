"""Dynamic dims planned at the probe input the NPU takes: a dispatch with dynamic
extents is planned at every dynamic input dim 64, then 1024, 16384, 8 and 1, and runs
on the NPU if any of them does (compiler_target/codegen/__init__.py). Each network
below ran a layer on the host at every size while only the first probe was lowered:
too big for one program at a batch of 64, emptied by poolings at a length of 64, or
reading a binding offset whose high word the host program made 1 at a batch of 64."""
import numpy as np
import onnxruntime
import pytest
from onnx import TensorProto, helper, numpy_helper

from hal_driver.status import StatusError
from tests.e2e.onnx_on_npu import (loaded_on_npu, on_npu_and_onnxruntime, onnx_file,
                                  onnxruntime_output)


def _graph(nodes, x_shape, y_shape, weights: dict):
    return helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, y_shape)],
        [numpy_helper.from_array(w, name) for name, w in weights.items()])


def _check(path, shapes, rng):
    """At each input shape: every dispatch on the NPU, the output onnxruntime's."""
    feeds = [{"x": rng.standard_normal(shape).astype(np.float32)} for shape in shapes]
    for got, expected in on_npu_and_onnxruntime(path, "g", feeds):
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4 * np.abs(expected).max())


def test_a_layer_past_a_programs_work_at_a_batch_of_64_runs_on_the_npu(tmp_path):
    """A 512-channel 3x3 convolution over 24x24 pixels: 1.36 G MACs per image, past the
    per-program work limit (6.9e10) at a batch of 64, well under it at 8."""
    rng = np.random.default_rng(0)
    w = (rng.standard_normal((512, 512, 3, 3)) * 0.02).astype(np.float32)
    conv = helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])
    path = onnx_file(_graph([conv], ("batch", 512, 24, 24), ("batch", 512, 24, 24), {"w": w}),
                     tmp_path / "wide_conv.onnx")
    _check(path, [(1, 512, 24, 24), (2, 512, 24, 24)], rng)


def test_a_length_emptied_by_poolings_at_64_runs_on_the_npu(tmp_path):
    """Seven poolings by 2 leave nothing of 64 samples (a pitch network's frames): the
    convolution after them is planned at 1024."""
    rng = np.random.default_rng(1)
    w = rng.standard_normal((16, 8, 1)).astype(np.float32)
    nodes = [helper.make_node("MaxPool", [f"p{i}" if i else "x"], [f"p{i + 1}"],
                              kernel_shape=[2], strides=[2]) for i in range(7)]
    nodes.append(helper.make_node("Conv", ["p7", "w"], ["y"]))
    path = onnx_file(_graph(nodes, (1, 8, "samples"), (1, 16, "frames"), {"w": w}),
                     tmp_path / "pooled.onnx")
    _check(path, [(1, 8, 1024), (1, 8, 4096)], rng)


def test_offsets_past_4_gib_at_a_batch_of_64_stay_binding_views(tmp_path):
    """Eight 1x1 branches concatenated into 128 channels of 240x320 pixels: at a batch
    of 64 the transient buffers pass 4 GiB, so the offsets of the last dispatches have a
    high word of 1 there; at run time it is 0, and so it is probed."""
    rng = np.random.default_rng(2)
    weights = {f"w{i}": (rng.standard_normal((16, 16, 1, 1)) * 0.2).astype(np.float32)
               for i in range(8)}
    weights["wf"] = (rng.standard_normal((4, 128, 3, 3)) * 0.05).astype(np.float32)
    nodes = [n for i in range(8) for n in (helper.make_node("Conv", ["x", f"w{i}"], [f"c{i}"]),
                                           helper.make_node("Relu", [f"c{i}"], [f"r{i}"]))]
    nodes += [helper.make_node("Concat", [f"r{i}" for i in range(8)], ["cat"], axis=1),
              helper.make_node("Conv", ["cat", "wf"], ["y"], pads=[1, 1, 1, 1])]
    path = onnx_file(_graph(nodes, ("batch", 16, 240, 320), ("batch", 4, 240, 320), weights),
                     tmp_path / "branches.onnx")
    _check(path, [(1, 16, 240, 320)], rng)


def test_a_frame_count_negative_at_64_samples_is_probed_at_longer_ones(tmp_path):
    """A 512-tap, stride-160 conv over a dynamic number of samples (a melspectrogram's
    frames), then a matmul over the frames: at 64 samples the host program's frame
    count is negative, passed as two words. With its high word read as 0, as the
    probes read high words, it was a frame count near 2^32: the matmul was planned past
    a program's work at every probe and ran on the host. A negative high word now makes
    the probe invalid, so the longer probes are tried."""
    rng = np.random.default_rng(6)
    weights = {"w": (rng.standard_normal((16, 1, 512)) * 0.05).astype(np.float32),
               "m": (rng.standard_normal((16, 8)) * 0.2).astype(np.float32)}
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], strides=[160]),
             helper.make_node("Transpose", ["c"], ["t"], perm=[0, 2, 1]),
             helper.make_node("MatMul", ["t", "m"], ["y"])]
    path = onnx_file(_graph(nodes, (1, 1, "samples"), (1, "frames", 8), weights),
                     tmp_path / "frames.onnx")
    _check(path, [(1, 1, 16000), (1, 1, 1760)], rng)


def test_a_dispatch_valid_at_a_batch_of_1_alone_runs_on_the_npu(tmp_path):
    """A dynamic batch whose conv output an exporter typed at a batch of 1 (value_info
    as torch.export writes it when it specialises the batch): the conv dispatch is
    invalid at every probe but 1. It was planned at the longer probes only and ran on the
    host (a SIGSEGV at a batch of 3, where the graph is invalid); it runs on the NPU at 1,
    and at 3 the call fails with a message naming the extents."""
    rng = np.random.default_rng(5)
    weights = {"w": rng.standard_normal((16, 1, 3, 3)).astype(np.float32),
               "b": rng.standard_normal(16).astype(np.float32)}
    graph = _graph([helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
                    helper.make_node("Relu", ["c"], ["y"])],
                   ("batch", 1, 40, 101), (1, 16, 40, 101), weights)
    graph.value_info.append(helper.make_tensor_value_info("c", TensorProto.FLOAT,
                                                          (1, 16, 40, 101)))
    path = onnx_file(graph, tmp_path / "batch_typed_1.onnx")
    _check(path, [(1, 1, 40, 101)], rng)
    with loaded_on_npu(path) as module:
        with pytest.raises(StatusError, match="invalid at these extents.*pc0=3|pc0=3.*invalid"):
            module.g(rng.standard_normal((3, 1, 40, 101)).astype(np.float32))


def test_a_dispatch_the_npu_takes_at_some_extents_only_stays_on_the_host(tmp_path):
    """A fixed 16x16 map resized (bilinear) to the input's dynamic size: at 8x8 its
    gather index happens to be affine, at 64x64 and 256x256 it is not. Only a refusal
    that depends on the probe's size sends the planner to other probes (a longer one
    for an empty or invalid dispatch, a shorter one for one past a program's work):
    planned on the NPU at 8, this dispatch failed its call at 256x256."""
    rng = np.random.default_rng(4)
    nodes = [helper.make_node("Shape", ["x"], ["hw"], start=2, end=4),
             helper.make_node("Concat", ["nc", "hw"], ["sizes"], axis=0),
             helper.make_node("Resize", ["map", "", "", "sizes"], ["r"], mode="linear",
                              coordinate_transformation_mode="half_pixel"),
             helper.make_node("Concat", ["x", "r"], ["y"], axis=1)]
    weights = {"map": rng.uniform(0, 1, (1, 3, 16, 16)).astype(np.float32),
               "nc": np.array([1, 3], np.int64)}
    path = onnx_file(_graph(nodes, (1, 3, "h", "w"), (1, 6, "h", "w"), weights),
                     tmp_path / "resized.onnx")
    with loaded_on_npu(path) as module:
        x = rng.standard_normal((1, 3, 256, 256)).astype(np.float32)
        got = np.asarray(module.g(x))
        assert module.last_call_stats.host_dispatches == 1
    np.testing.assert_allclose(got, onnxruntime_output(path, {"x": x}), rtol=1e-5, atol=1e-5)


def test_a_static_dispatch_at_an_offset_iree_joins_from_two_words_runs_on_the_npu(tmp_path):
    """A chess network's two heads with a dynamic batch: each Gemm has static shapes,
    but its input lies at a batch-dependent offset in the transient buffer, which IREE
    passes as two words joined with `arith.shli`/`ori` (it cannot bound the offset below
    4 GiB). The dispatch has no dynamic extents and went to the host ('op arith.shli has
    no NPU equivalent'); it is now specialised for the high word like a dynamic one."""
    rng = np.random.default_rng(3)
    weights = {"wp": rng.standard_normal((2, 32, 1, 1)) / 6,
               "wv": rng.standard_normal((1, 32, 1, 1)) / 6,
               "gp": rng.standard_normal((256, 128)) / 11, "gv": rng.standard_normal((64, 64)) / 8}
    weights = {name: w.astype(np.float32) for name, w in weights.items()}
    weights["flat"] = np.array([1, -1], np.int64)
    node = helper.make_node
    nodes = [node("Conv", ["x", "wp"], ["cp"]), node("Relu", ["cp"], ["ap"]),
             node("Reshape", ["ap", "flat"], ["fp"]),
             node("Gemm", ["fp", "gp"], ["policy"], transB=1),
             node("Conv", ["x", "wv"], ["cv"]), node("Relu", ["cv"], ["av"]),
             node("Reshape", ["av", "flat"], ["fv"]),
             node("Gemm", ["fv", "gv"], ["value"], transB=1)]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ("batch", 32, 8, 8))],
        [helper.make_tensor_value_info("policy", TensorProto.FLOAT, (1, 256)),
         helper.make_tensor_value_info("value", TensorProto.FLOAT, (1, 64))],
        [numpy_helper.from_array(w, name) for name, w in weights.items()])
    path = onnx_file(graph, tmp_path / "heads.onnx")
    x = rng.standard_normal((1, 32, 8, 8)).astype(np.float32)
    with loaded_on_npu(path) as module:
        policy, value = (np.asarray(r) for r in module.g(x))
        assert module.last_call_stats.host_dispatches == 0
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    for got, expected in zip((policy, value), session.run(None, {"x": x})):
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


def test_a_gather_with_no_work_at_a_probe_leaves_the_dispatch_to_the_probes(tmp_path):
    """A nearest 2x Resize added to a tensor of its own dynamic dims (an FPN's lateral
    as a network exports it with separate symbols): at the probes, where the two sizes
    disagree, the fused gather has loops of extent 0; its analysis divided by the extent
    (ZeroDivisionError, the compile stopped). Now that probe is refused as empty like
    any other; here no probe is consistent, so the dispatch stays on the host, and the
    result is onnxruntime's."""
    scales = np.array([1, 1, 2, 2], np.float32)
    graph = helper.make_graph(
        [helper.make_node("Resize", ["x", "roi", "scales"], ["up"], mode="nearest",
                          coordinate_transformation_mode="asymmetric"),
         helper.make_node("Add", ["up", "lateral"], ["y"])],
        "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, "h", "w"]),
              helper.make_tensor_value_info("lateral", TensorProto.FLOAT, [1, 8, "h2", "w2"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, "h2", "w2"])],
        [numpy_helper.from_array(np.zeros(0, np.float32), "roi"),
         numpy_helper.from_array(scales, "scales")])
    path = onnx_file(graph, tmp_path / "upsample_add.onnx")
    rng = np.random.default_rng(2)
    feeds = {"x": rng.standard_normal((1, 8, 20, 24)).astype(np.float32),
             "lateral": rng.standard_normal((1, 8, 40, 48)).astype(np.float32)}
    with loaded_on_npu(path) as module:
        got = np.asarray(module.g(*feeds.values()))
    np.testing.assert_array_equal(got, onnxruntime_output(path, feeds))


def test_a_layer_past_32_bit_offsets_at_a_batch_of_64_runs_on_the_npu(tmp_path):
    """A VAE preview decoder's last conv (64 -> 3 channels, full resolution) after three
    2x ConvTransposes: at the first probe (batch, height and width 64) its tensors pass
    4 GiB, and an offset did not fit an instruction's 32-bit field ('operands do not fit
    the record'): it ran on the host at every size. Like a program past its work limit,
    that probe is now followed by the shorter ones."""
    rng = np.random.default_rng(9)
    weights, nodes, value = {}, [], "x"
    for i in range(3):
        weights[f"up{i}"] = (rng.standard_normal((64, 64, 2, 2)) * 0.1).astype(np.float32)
        nodes.append(helper.make_node("ConvTranspose", [value, f"up{i}"], [f"u{i}"],
                                      kernel_shape=[2, 2], strides=[2, 2]))
        value = f"u{i}"
    weights["w"] = (rng.standard_normal((3, 64, 3, 3)) * 0.1).astype(np.float32)
    nodes.append(helper.make_node("Conv", [value, "w"], ["y"], kernel_shape=[3, 3],
                                  pads=[1, 1, 1, 1]))
    path = onnx_file(_graph(nodes, ["n", 64, "h", "w"], ["n", 3, "H", "W"], weights),
                     tmp_path / "upsampled_conv.onnx")
    _check(path, [(1, 64, 8, 10), (2, 64, 5, 12)], rng)


def _same_upper_blocks(count: int, rng):
    """`count` tf2onnx MobileNet blocks on a dynamic image: a 1x1 convolution and a clip
    into a stride-2 depthwise 3x3 with SAME_UPPER padding, whose top and left pads are
    1 on an odd side and 0 on an even one: the 1x1 convolution stores into the padded
    input at those pads, push constants the host program computes per size."""
    nodes, weights, previous, channels = [], {}, "x", 8
    for i in range(count):
        out = "y" if i == count - 1 else f"d{i}"
        nodes += [helper.make_node("Conv", [previous, f"p{i}"], [f"c{i}"]),
                  helper.make_node("Clip", [f"c{i}", "lo", "hi"], [f"r{i}"]),
                  helper.make_node("Conv", [f"r{i}", f"w{i}"], [out], auto_pad="SAME_UPPER",
                                   group=16, strides=[2, 2], kernel_shape=[3, 3])]
        weights[f"p{i}"] = rng.standard_normal((16, channels, 1, 1)).astype(np.float32)
        weights[f"w{i}"] = rng.standard_normal((16, 1, 3, 3)).astype(np.float32)
        previous, channels = out, 16
    weights["lo"], weights["hi"] = np.array(0, np.float32), np.array(6, np.float32)
    return _graph(nodes, (1, 8, "h", "w"), (1, 16, "ho", "wo"), weights)


def test_stores_at_padding_offsets_computed_per_size_run_on_the_npu(tmp_path):
    """One block: the store's slice has two dynamic offsets, the two terms of a binding
    view. Two: the second block's padded input lies in a transient buffer at an offset
    the host program computes too, three terms, and the pads are specialised with the
    extents (dynamic_extents.crowded_offset_constants). Both ran the 1x1 convolutions
    on the host ('several dynamic offsets'): a BodyPix MobileNet at every size."""
    rng = np.random.default_rng(4)
    for count in (1, 2):
        path = onnx_file(_same_upper_blocks(count, rng), tmp_path / f"same_upper_{count}.onnx")
        _check(path, [(1, 8, 33, 41), (1, 8, 24, 36), (1, 8, 17, 20)], rng)
