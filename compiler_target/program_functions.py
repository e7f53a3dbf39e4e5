"""The bodies of a whole program's functions, its constant globals and the cloning of a
parsed function's body, for the rewrites the split pipeline applies before dispatches
form (compiler_target.pipeline.IR_REWRITES) and the probe evaluator, and the ops nested
in an op, for the code generator's walks of a dispatch function."""
from iree.compiler import ir


def function_blocks(module):
    """Each block of each `util.func` and `func.func` of `module` (a module operation)."""
    for function in module.regions[0].blocks[0].operations:
        if function.operation.name in ("util.func", "func.func"):
            for region in function.operation.regions:
                yield from region.blocks


def nested_ops(op):
    """Every operation inside `op`'s regions, each before the ops nested in it."""
    for region in op.regions:
        for block in region.blocks:
            for inner in block.operations:
                yield inner.operation
                yield from nested_ops(inner.operation)


def immutable_global_values(module) -> dict[str, ir.Attribute]:
    """Symbol name -> initial value of each immutable `util.global` of `module` that has
    one (IREE's const-eval leaves its results so)."""
    values = {}
    for op in module.regions[0].blocks[0].operations:
        op = op.operation
        if op.name == "util.global" and "is_mutable" not in op.attributes and \
                "initial_value" in op.attributes:
            values[ir.StringAttr(op.attributes["sym_name"]).value] = \
                op.attributes["initial_value"]
    return values


def loaded_global(op) -> str:
    """The symbol name a `util.global.load` reads."""
    return ir.FlatSymbolRefAttr(op.attributes["global"]).value


def clone_before(op, parsed, values: list) -> ir.Value:
    """Clones the parsed function's body before `op`, its arguments bound to `values`;
    returns the value it returns."""
    function = parsed.body.operations[0]
    block = function.regions[0].blocks[0]
    mapping = dict(zip(block.arguments, values))
    with ir.InsertionPoint(op):
        for inner in block.operations:
            if inner.name == "func.return":
                return mapping[inner.operands[0]]
            clone = inner.clone()
            for i, operand in enumerate(clone.operands):
                if operand in mapping:
                    clone.operands[i] = mapping[operand]
            for old, new in zip(inner.results, clone.results):
                mapping[old] = new
    raise AssertionError("the parsed function has no return")
