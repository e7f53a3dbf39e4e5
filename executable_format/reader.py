"""read_executable(data): a verified npu-fb buffer as plain Python objects."""
from dataclasses import dataclass

import numpy as np

from .generated import npu_executable_generated as fb
from .cost import Roofline
from .isa import DTYPE_NAMES, INSTRUCTION_BYTES, INSTRUCTION_DTYPE, DType
from .machine import MachineConfig
from .verifier import READ_ONLY, verify


@dataclass(frozen=True)
class Binding:
    flags: int
    min_size: int

    @property
    def read_only(self) -> bool:
        return bool(self.flags & READ_ONLY)


@dataclass(frozen=True)
class BindingView:
    """A window of binding `binding` starting at byte (push constant `offset_constant`)
    x `offset_scale` + `offset_base` (+ push constant `step_constant` x `step_scale`
    when step_scale is not 0); instructions name view k as binding
    len(Export.bindings) + k."""
    binding: int
    offset_constant: int
    min_size: int
    offset_scale: int = 1
    offset_base: int = 0
    step_constant: int = 0
    step_scale: int = 0


@dataclass(frozen=True)
class Program:
    instructions: bytes          # the 64-byte records
    sram_bytes: int              # highest SRAM byte the program uses (exclusive)

    @property
    def instruction_count(self) -> int:
        return len(self.instructions) // INSTRUCTION_BYTES

    def records(self) -> np.ndarray:
        """The instructions as a read-only array of isa.INSTRUCTION_DTYPE."""
        return np.frombuffer(self.instructions, dtype=INSTRUCTION_DTYPE)


@dataclass(frozen=True)
class ExportDebug:
    dispatch_name: str | None
    source_location: str | None
    npu_ir: str | None


@dataclass(frozen=True)
class Parametric:
    """A dispatch specialised at dispatch time for the values of its extent constants."""
    source: str                         # the dispatch's hal.executable (MLIR text)
    dim_constants: tuple[int, ...]      # push constant ordinals the extents come from


@dataclass(frozen=True)
class Export:
    name: str
    ordinal: int
    bindings: list[Binding]
    constant_count: int
    workgroup_count: tuple[int, int, int]
    program: Program
    debug: ExportDebug | None
    views: list[BindingView]
    roofline: Roofline | None           # the dispatch's true roofline, when recorded
    parametric: Parametric | None = None    # extents given at dispatch time (1.5)

    @property
    def binding_count(self) -> int:
        return len(self.bindings)


@dataclass(frozen=True)
class Executable:
    version: tuple[int, int]
    machine: MachineConfig
    exports: list[Export]
    constants: bytes

    def export(self, name: str) -> Export:
        """The export called `name` (KeyError if there is none)."""
        for export in self.exports:
            if export.name == name:
                return export
        raise KeyError(name)


def read_executable(data, verified: bool = False) -> Executable:
    """Verifies `data` (FormatError on any problem) and decodes it. `verified`: the bytes
    are ones this process's ExecutableBuilder.finish just verified (the compiler linking
    its own executables), so the check is not repeated; never for bytes from outside."""
    data = bytes(data)
    if not verified:
        verify(data)
    root = fb.Executable.GetRootAs(data, 0)
    machine = MachineConfig(**{_str(root.Machine(i).Key()): root.Machine(i).Value()
                               for i in range(root.MachineLength())})
    constants = root.ConstantsAsNumpy().tobytes() if root.ConstantsLength() else b""
    return Executable(version=(root.VersionMajor(), root.VersionMinor()), machine=machine,
                      exports=[_export(root.Exports(i)) for i in range(root.ExportsLength())],
                      constants=constants)


def _str(raw: bytes | None) -> str | None:
    return None if raw is None else raw.decode("utf-8")


def _export(export) -> Export:
    program = export.Program()
    instructions = program.InstructionsAsNumpy().tobytes()
    debug = export.Debug()
    return Export(
        name=_str(export.Name()),
        ordinal=export.Ordinal(),
        bindings=[Binding(export.Bindings(i).Flags(), export.Bindings(i).MinSize())
                  for i in range(export.BindingsLength())],
        constant_count=export.ConstantCount(),
        workgroup_count=tuple(export.WorkgroupCount(i) for i in range(3)),
        program=Program(instructions, program.SramBytes()),
        debug=None if debug is None else ExportDebug(
            _str(debug.DispatchName()), _str(debug.SourceLocation()), _str(debug.NpuIr())),
        views=[BindingView(v.Binding(), v.OffsetConstant(), v.MinSize(), v.OffsetScale(),
                           v.OffsetBase(), v.StepConstant(), v.StepScale())
               for v in map(export.Views, range(export.ViewsLength()))],
        roofline=_roofline(export.Roofline()),
        parametric=_parametric(export.Parametric()))


def _parametric(table) -> Parametric | None:
    if table is None:
        return None
    return Parametric(_str(table.Source()),
                      tuple(table.DimConstants(i) for i in range(table.DimConstantsLength())))


def _roofline(table) -> Roofline | None:
    if table is None:
        return None
    return Roofline(table.UsefulMacs(), DTYPE_NAMES[DType(table.MacDtype())], table.ReadBytes(),
                    table.WriteBytes())
