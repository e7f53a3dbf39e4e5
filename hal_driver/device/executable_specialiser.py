"""Specialisation of parametric npu-fb exports: dispatches whose tensor extents IREE
passes as push constants. The device hands the export's source and the values of its
extent constants to the specialiser the compiler package registers (entry point group
`iree_npu.specialisers`, name `npu-fb`), verifies the static npu-fb it returns and
keeps it for later calls with the same extents (docs/npu-ir-to-hal.md, "Dynamic
shapes"). The device imports nothing of the compiler: without a registered specialiser
a parametric export fails its dispatch with FAILED_PRECONDITION.
"""
import threading
from importlib.metadata import entry_points

from executable_format.errors import FormatError
from executable_format.reader import Executable, Export, read_executable
from executable_format.version import FORMAT_NAME
from hal_driver.status import StatusCode, StatusError

ENTRY_POINT_GROUP = "iree_npu.specialisers"
ENTRY_POINT_NAME = FORMAT_NAME    # the entry point is named after the format it specialises

_specialiser = None
_specialiser_lock = threading.Lock()


def specialiser():
    """The registered `specialise(source, constants, machine, binding_lengths) -> npu-fb
    bytes`, or None."""
    global _specialiser
    with _specialiser_lock:
        if _specialiser is None:
            found = entry_points(group=ENTRY_POINT_GROUP, name=ENTRY_POINT_NAME)
            _specialiser = next(iter(found)).load() if found else False
        return _specialiser or None


class Specialisations:
    """The static programs of one executable's parametric exports, by export ordinal and
    extent values."""

    def __init__(self, machine):
        self.machine = machine
        self._programs: dict[tuple, Executable] = {}
        self._lock = threading.Lock()

    def program(self, export: Export, constants,
                binding_lengths: list[int]) -> tuple[Executable, Export]:
        """The static executable and export computing `export` at the extents given by
        `constants` (the dispatch's push constants); `binding_lengths` are the bound
        ranges, which extents must not overrun."""
        extents = {k: int(constants[k]) for k in export.parametric.dim_constants}
        key = (export.ordinal, tuple(extents.values()))
        with self._lock:
            executable = self._programs.get(key)
        if executable is None:
            executable = self._specialise(export, extents, binding_lengths)
            with self._lock:
                self._programs[key] = executable
        return executable, executable.exports[0]

    def _specialise(self, export: Export, extents: dict[int, int],
                    binding_lengths: list[int]) -> Executable:
        where = (f"npu-fb export '{export.name}' at extents "
                 + ", ".join(f"pc{k}={v}" for k, v in extents.items()))
        specialise = specialiser()
        if specialise is None:
            raise StatusError(StatusCode.FAILED_PRECONDITION,
                              f"{where}: the export is parametric (dynamic extents) and no "
                              f"specialiser is installed (entry point group "
                              f"'{ENTRY_POINT_GROUP}', provided by the iree-npu compiler)")
        try:
            data = specialise(export.parametric.source, extents, self.machine, binding_lengths)
        except ValueError as error:      # the dispatch cannot run on the NPU at these extents
            raise StatusError(StatusCode.UNIMPLEMENTED, f"{where}: {error}") from None
        except Exception as error:       # a specialiser bug: one line, never a traceback
            raise StatusError(StatusCode.INTERNAL,
                              f"{where}: specialisation failed: {type(error).__name__}: "
                              f"{error}") from None
        try:
            executable = read_executable(data)
        except FormatError as error:
            raise StatusError(StatusCode.INTERNAL, f"{where}: specialised {error}") from None
        _check_matches(where, export, executable)
        return executable


def _check_matches(where: str, export: Export, executable: Executable) -> None:
    """The specialised program must take the parametric export's interface."""
    static = executable.exports[0] if len(executable.exports) == 1 else None
    if (static is None or static.parametric is not None
            or static.constant_count != export.constant_count
            or [b.flags for b in static.bindings] != [b.flags for b in export.bindings]):
        raise StatusError(StatusCode.INTERNAL,
                          f"{where}: the specialised executable does not match the export's "
                          f"interface (bindings, push constants)")
