"""Mixed-precision f16 bodies: a network exported in f16 reaches the code generator as
f16 contractions summing in f32 (`extf, extf, mulf, addf`) whose epilogues `truncf` the
sum to f16, `extf` it again for f32 arithmetic (a BatchNorm's f32 scale), and compute
the rest (an activation) in f16.

Such an expression computes in f32. `extf` is then the value itself, and each f16
result (of `truncf`, or of an f16 op) is rounded to f16 by a ("narrow", (a,)) node:
the bits stock's CPU code has, which computes every f16 op in f32 and rounds its result
(LLVM's promotion of f16 arithmetic; checked by tests/e2e/test_half_precision.py). A
result that is already an f16 value (a max, select, negation or rounding of f16
values, an f16 input or constant) is not rounded again."""
import numpy as np

from ...program_functions import nested_ops

# Node kinds whose result is one of their operands, or an integer or negation of one:
# an f16 value when the operands are.
_EXACT = frozenset({"max", "min", "neg", "abs", "select", "selgt", "selge", "floor", "ceil",
                    "round", "roundaway"})


def rounds_half(function) -> bool:
    """Whether the dispatch function converts between f16 and f32 anywhere (then its f16
    ops' results are rounded as `narrow` nodes)."""
    return any(converts_half(op) for op in nested_ops(function))


def converts_half(op) -> bool:
    """Whether the op is an extf of f16 to f32 or a truncf of f32 to f16."""
    if op.name == "arith.extf":
        return str(op.operands[0].type) == "f16" and str(op.results[0].type) == "f32"
    if op.name == "arith.truncf":
        return str(op.operands[0].type) == "f32" and str(op.results[0].type) == "f16"
    return False


def is_half_value(nodes: list, input_dtypes: list[str], node: int) -> bool:
    """Whether expression node `node` (of `nodes`, inputs of `input_dtypes`) always holds
    an f16 value."""
    kind = nodes[node][0]
    if kind == "narrow":
        return True
    if kind == "input":
        return input_dtypes[nodes[node][1]] == "f16"
    if kind == "const":
        value = nodes[node][1]
        return bool(np.float32(np.float16(value)) == np.float32(value)) or value != value
    if kind in _EXACT:
        return all(is_half_value(nodes, input_dtypes, a) for a in nodes[node][1])
    return False
