"""Edits at the executable-sources phase: turn an executable the code generator accepted
into a cheap stub that the stock compiler carries to the hal phase under the `npu-fb`
format.

- The inner function body is emptied.
- The export's workgroup count region returns the plan's constant grid.
- The variant's target becomes `#hal.executable.target<"vmvx", "npu-fb">`: the stock vmvx
  backend translates the empty function into a small VM module without any LLVM work
  (the llvm-cpu backend spent 0.1-0.15 s per stub compiling and linking an empty ELF),
  and the stock hal phase emits `hal.executable.format` queries for `npu-fb` by itself.
  The bytes it serializes are replaced after the hal phase (hal_binaries.py).
- The variant symbol is renamed to `npu_fb` (and every reference to it), so the binary
  and its vmfb archive member are named after the format they hold.
"""
from iree.compiler import ir

from executable_format.version import FORMAT_NAME as NPU_FORMAT
NPU_VARIANT = "npu_fb"
STUB_TARGET = f'#hal.executable.target<"vmvx", "{NPU_FORMAT}">'


def executables(module) -> list:
    """The module's hal.executable ops in order."""
    return [op for op in module.regions[0].blocks[0].operations
            if op.operation.name == "hal.executable"]


def symbol_name(op) -> str:
    return ir.StringAttr(op.attributes["sym_name"]).value


def variant_of(executable):
    return executable.regions[0].blocks[0].operations[0]


def stub_for_npu(module, executable, workgroup_count: tuple[int, int, int]) -> list[str]:
    """Stubs the executable; returns its export symbols (what the host program looks up
    at the hal phase, in whichever executable the stock linker puts them)."""
    variant = variant_of(executable)
    exports = []
    with module.context, ir.Location.unknown():
        for op in variant.regions[0].blocks[0].operations:
            if op.operation.name == "hal.executable.export":
                _set_workgroup_count(op, workgroup_count)
                exports.append(symbol_name(op))
            elif op.operation.name == "builtin.module":
                for function in op.regions[0].blocks[0].operations:
                    _empty_body(function)
        variant.attributes["target"] = ir.Attribute.parse(STUB_TARGET)
        _rename_variant(module, executable, variant, NPU_VARIANT)
    return exports


def _set_workgroup_count(export, workgroup_count) -> None:
    block = export.regions[0].blocks[0]
    _erase_all(block)
    index = ir.IndexType.get()
    with ir.InsertionPoint(block):
        counts = [ir.Operation.create("arith.constant", results=[index],
                                      attributes={"value": ir.IntegerAttr.get(index, n)}).result
                  for n in workgroup_count]
        ir.Operation.create("hal.return", operands=counts)


def _empty_body(function) -> None:
    block = function.regions[0].blocks[0]
    _erase_all(block)
    with ir.InsertionPoint(block):
        ir.Operation.create("func.return")


def _erase_all(block) -> None:
    for op in reversed(list(block.operations)):  # users before their operands
        op.erase()


def _rename_variant(module, executable, variant, new_name: str) -> None:
    executable_name, old_name = symbol_name(executable), symbol_name(variant)
    variant.attributes["sym_name"] = ir.StringAttr.get(new_name)

    def renamed(attribute):
        """The attribute with references to the variant renamed, or None if it has none."""
        if isinstance(attribute, ir.ArrayAttr):
            elements = list(attribute)
            changed = [renamed(e) for e in elements]
            if not any(changed):
                return None
            return ir.ArrayAttr.get([c or e for c, e in zip(changed, elements)])
        if isinstance(attribute, ir.SymbolRefAttr):
            path = attribute.value
            if path[:2] == [executable_name, old_name]:
                return ir.SymbolRefAttr.get([executable_name, new_name, *path[2:]])
        return None

    def visit(op):
        for name in list(op.attributes):
            replacement = renamed(op.attributes[name])
            if replacement is not None:
                op.attributes[name] = replacement
        return ir.WalkResult.ADVANCE

    for op in module.regions[0].blocks[0].operations:
        if op.operation.name != "hal.executable":
            op.operation.walk(visit)
