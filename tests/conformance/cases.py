"""ONNX's own node test cases for the ops the npu target claims.

The cases come from the onnx package's backend test case collectors (model + inputs +
expected outputs computed by onnx itself); nothing here was written by this project.
Cases of one op type are grouped in batches of up to BATCH_SIZE, which runner.py
compiles as one module (a compile's fixed cost, about 1 s, is most of a case's).
"""
import warnings
from dataclasses import dataclass, field

import numpy as np
import onnx

# Every op the npu target claims to compile (on the NPU or through host fallback).
CLAIMED_OPS = ("Conv", "MatMul", "Gemm", "Add", "Sub", "Mul", "Div", "Relu", "Clip",
               "Sigmoid", "Tanh", "LeakyRelu", "MaxPool", "AveragePool",
               "GlobalAveragePool", "BatchNormalization", "Flatten", "Reshape",
               "Transpose", "Concat", "Softmax", "Sqrt", "LayerNormalization")
# Ops whose f32 cases must run on the NPU itself (not through host fallback).
NPU_OPS = frozenset({"Conv", "MatMul", "Gemm", "Add", "Sub", "Mul", "Div", "Relu", "Clip",
                     "Sigmoid", "Tanh", "LeakyRelu", "MaxPool", "AveragePool",
                     "GlobalAveragePool", "Sqrt", "LayerNormalization"})
# Cases of those ops the NPU does not claim, and why (they run through host fallback).
NOT_CLAIMED = {
    "1-D and 3-D pooling": lambda name: "pool" in name and ("_1d_" in name or "_3d_" in name),
    "average pooling with dilations excluding pads (divisor by ceildiv in the body)":
        lambda name: name == "test_averagepool_2d_dilations",
}
BATCH_SIZE = 12


def npu_claims(case: "Case") -> bool:
    """Whether the NPU itself (not host fallback) must run this case's dispatches."""
    return (case.op_type in NPU_OPS and case.all_f32
            and not any(matches(case.name) for matches in NOT_CLAIMED.values()))


@dataclass
class Case:
    name: str
    op_type: str
    model: onnx.ModelProto
    inputs: list[np.ndarray]
    outputs: list[np.ndarray]
    rtol: float
    atol: float
    batch: list["Case"] = field(default_factory=list, repr=False)  # compiled together

    @property
    def all_f32(self) -> bool:
        return all(getattr(a, "dtype", None) == np.float32 for a in self.inputs + self.outputs)


def _to_numpy(proto):
    """An array; a sequence input (a list of arrays of different shapes) stays a list."""
    if isinstance(proto, onnx.TensorProto):
        return onnx.numpy_helper.to_array(proto)
    if isinstance(proto, list):
        return [_to_numpy(item) for item in proto]
    return np.asarray(proto)


def collect(selection: str = "default") -> list[Case]:
    """`default`: every single-node case of the claimed ops, and one case of every other
    op type the onnx wheel has cases for (the first by name that is not an `_expanded`
    variant); `all`: every node case the wheel ships."""
    from onnx.backend.test.case.node import collect_testcases
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        found = sorted(collect_testcases(), key=lambda tc: tc.name)
    cases, sampled = [], set(CLAIMED_OPS)
    for tc in found:
        nodes = tc.model.graph.node
        op_type = nodes[0].op_type if nodes else ""
        if selection != "all":
            claimed = len(nodes) == 1 and op_type in CLAIMED_OPS and "expanded" not in tc.name
            first_of_op = op_type not in sampled and "expanded" not in tc.name
            if not (claimed or first_of_op):
                continue
            sampled.add(op_type)
        inputs, outputs = tc.data_sets[0]
        cases.append(Case(tc.name, op_type, tc.model,
                          [_to_numpy(x) for x in inputs], [_to_numpy(y) for y in outputs],
                          tc.rtol, tc.atol))
    return _batched(cases)


def _batched(cases: list[Case]) -> list[Case]:
    """The cases in batches of up to BATCH_SIZE of one op type, each case's `batch` set;
    batch members are adjacent, so that a pytest-xdist worker mostly gets whole batches."""
    by_op: dict[str, list[Case]] = {}
    for case in cases:
        by_op.setdefault(case.op_type, []).append(case)
    ordered = []
    for same_op in by_op.values():
        for start in range(0, len(same_op), BATCH_SIZE):
            batch = same_op[start:start + BATCH_SIZE]
            for case in batch:
                case.batch = batch
            ordered += batch
    return ordered
