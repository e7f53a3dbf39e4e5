"""Legalization: whether the NPU code generator takes a dispatch analysis produced, and
if not, the reason the report shows ("not supported on npu: ...")."""
import math
from dataclasses import fields

from executable_format.cost import ELEMENT_WORK, program_work_limit

from .analysis import Analysis
from .analysis.errors import EMPTY
from .ops import Conv2D, Matmul, NpuOp, Pool2D, Reduce, TensorRef

DTYPES = ("f32", "f16", "bf16", "i8", "u8", "i32")  # the element types ops.py describes
POOL_KINDS = ("max", "avg", "sum")
REDUCE_KINDS = ("sum", "max", "min", "mean")   # min: -max(-x), negated by tile_reduce
QUANTIZED = {"f32", "i8", "u8", "i32"}  # a quantized graph mixes these (integer expression nodes)
HALF = {"f16", "f32"}     # a mixed-precision f16 body (analysis/half_precision.py) mixes these


def _widening_mac(op: NpuOp, dtypes: list[str]) -> bool:
    """f16 or bf16 operands of a matmul or convolution with f32 results: the MAC array
    accumulates half-precision operands in f32."""
    operands = (op.a, op.b) if isinstance(op, Matmul) else \
        (op.input, op.weight) if isinstance(op, Conv2D) else ()
    half = {ref.dtype for ref in operands}
    return half in ({"f16"}, {"bf16"}) and set(dtypes) == half | {"f32"}


def legalize(analysis: Analysis, machine) -> str:
    """"" if the dispatch goes to the NPU code generator, else why it stays on the host.
    `machine` is for limits that depend on it; lowering reports what does not fit."""
    if analysis.op is None:
        return f"not supported on npu: {analysis.problem}"
    problem = _problem(analysis.op) or _past_work_limit(analysis, machine)
    return f"not supported on npu: {problem}" if problem else ""


PAST_WORK_LIMIT = "over the per-program work limit"


def _past_work_limit(analysis: Analysis, machine) -> str:
    """Why the dispatch's program would pass the verifier's work limit, before any code
    is generated: each MAC is a unit of work, and each output element is stored by a
    DMA at ELEMENT_WORK units."""
    stored = sum(math.prod(ref.shape) for role, ref in _tensor_refs(analysis.op)
                 if role == "out" or role.startswith("out."))
    work = analysis.macs + ELEMENT_WORK * stored
    limit = program_work_limit(machine)
    if work <= limit:
        return ""
    return f"{analysis.macs} MACs and {stored} stored elements: {PAST_WORK_LIMIT} {limit}"


def _problem(op: NpuOp) -> str:
    refs = _tensor_refs(op)
    # An i64 input is loaded converted to f32 (the walk takes one only as sitofp to f32)
    dtypes = sorted({ref.dtype for role, ref in refs if not _converted_i64(role, ref)})
    unsupported = [f"{ref.dtype} ({role})" for role, ref in refs
                   if ref.dtype not in DTYPES and not _converted_i64(role, ref)]
    if unsupported:
        return f"unsupported element type {unsupported[0]}"
    if len(dtypes) > 1 and not set(dtypes) <= QUANTIZED and not set(dtypes) <= HALF and \
            not _widening_mac(op, dtypes):
        return f"mixed element types {'/'.join(dtypes)}"
    for role, ref in refs:
        if 0 in ref.shape:
            return f"{EMPTY} {role} {ref.shape}"
    if isinstance(op, Conv2D):
        return _conv_problem(op)
    if isinstance(op, Pool2D) and op.kind not in POOL_KINDS:
        return f"pooling kind {op.kind}"
    if isinstance(op, Reduce) and op.kind not in REDUCE_KINDS:
        return f"reduction kind {op.kind}"
    return ""


def _converted_i64(role: str, ref: TensorRef) -> bool:
    """An i64 expression input (elementwise or epilogue): loaded converted to f32."""
    return ref.dtype == "i64" and role.startswith(("input ", "epilogue input "))


def _conv_problem(op: Conv2D) -> str:
    channels, features = op.input.shape[1], op.weight.shape[0]
    if channels % op.groups or features % op.groups or op.weight.shape[1] * op.groups != channels:
        return f"groups={op.groups} with C={channels} F={features}"
    return ""


def _tensor_refs(op: NpuOp) -> list[tuple[str, TensorRef]]:
    """Every TensorRef of the op with a name for messages (e.g. "epilogue input 1",
    "out.1" for the op's first extra output)."""
    refs = []
    for field in fields(op):
        value = getattr(op, field.name)
        if isinstance(value, TensorRef):
            refs.append((field.name, value))
        elif isinstance(value, list):
            label = field.name.replace("_", " ").rstrip("s")
            refs += [(f"{label} {k}", ref) for k, ref in enumerate(value)
                     if isinstance(ref, TensorRef)]
    refs += [(f"out.{k}", ref) for k, (ref, _) in enumerate(getattr(op, "extra_outputs", []), 1)]
    return refs
