"""The bodies of a whole program's functions, for the rewrites the split pipeline applies
before dispatches form (compiler_target.pipeline.IR_REWRITES), and the ops nested in
an op, for the code generator's walks of a dispatch function."""


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
