"""The bodies of a whole program's functions, for the rewrites the split pipeline applies
before dispatches form (compiler_target.pipeline.IR_REWRITES)."""


def function_blocks(module):
    """Each block of each `util.func` and `func.func` of `module` (a module operation)."""
    for function in module.regions[0].blocks[0].operations:
        if function.operation.name in ("util.func", "func.func"):
            for region in function.operation.regions:
                yield from region.blocks
