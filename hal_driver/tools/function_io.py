"""iree-run-module's `--input=`, `--output=` and result printing
(iree/tooling/function_io.c) over host-side values.

Host values: `HostTensor` for buffer views, `(kind, number)` for scalars of cconv
kind i/I/f/F, None for null refs; other refs pass through unchanged.
"""
import io
import sys

import numpy as np

from hal_driver.device import element_type as et
from hal_driver.device.buffer_view import BufferView
from hal_driver.status import StatusCode, StatusError
from hal_driver.tools.buffer_view_text import HostTensor, format_tensor, parse_tensor
from hal_driver.tools.comparison import IGNORED
from hal_driver.vm.ref import ref_type


class NpyStreams:
    """Open .npy files: `@path` starts a file from its beginning, `+path` continues it,
    so several inputs can come from one file in order."""

    def __init__(self):
        self._files: dict[str, io.BufferedReader] = {}

    def next_array(self, spec: str) -> np.ndarray:
        mode, path = spec[0], spec[1:]
        if mode == "@" or path not in self._files:
            if path in self._files:
                self._files[path].close()
            try:
                self._files[path] = open(path, "rb")
            except OSError as error:
                raise StatusError(StatusCode.NOT_FOUND,
                                  f"failed to open file '{path}': {error.strerror}") from None
        f = self._files[path]
        try:
            magic = f.read(len(np.lib.format.MAGIC_PREFIX))
            f.seek(-len(magic), io.SEEK_CUR)
            if not magic:
                raise StatusError(StatusCode.OUT_OF_RANGE,
                                  f"reading an ndarray from '{path}': end-of-file")
            if magic != np.lib.format.MAGIC_PREFIX:
                raise StatusError(StatusCode.INVALID_ARGUMENT,
                                  f"'{path}' is not a valid .npy file: npy header magic mismatch")
            return np.load(f, allow_pickle=False)
        except (ValueError, EOFError, OSError) as error:
            raise StatusError(StatusCode.INVALID_ARGUMENT,
                              f"reading an ndarray from '{path}': {error}") from None
        except MemoryError as error:
            raise StatusError(StatusCode.RESOURCE_EXHAUSTED,
                              f"reading an ndarray from '{path}': {error}") from None

    def at_end(self, path: str) -> bool:
        f = self._files[path]
        return f.peek(1) == b""

    def close(self) -> None:
        for f in self._files.values():
            f.close()


def npy_tensor(array: np.ndarray) -> HostTensor:
    """numpy files carry signed integer types (numpy_io.c)."""
    return HostTensor(np.asarray(array, order="C"),   # keeps rank 0 (ascontiguousarray would not)
                      et.from_dtype(array.dtype, signless=False))


def parse_inputs(specs: list[str], kinds: tuple, allow_ignored: bool = False) -> list:
    """Parses specs in order; a `*file.npy` spec expands to all remaining arrays."""
    streams = NpyStreams()
    values = []
    try:
        for spec in specs:
            spec = spec.strip()
            try:
                values.extend(_parse_one(spec, kinds[len(values):], streams, allow_ignored))
            except StatusError as status:
                raise StatusError(status.code, f"{status.message}; parsing input `{spec}`") from None
    finally:
        streams.close()
    return values


def _parse_one(spec: str, kinds: tuple, streams: NpyStreams, allow_ignored: bool) -> list:
    kind = kinds[0] if kinds else "r"
    if not spec:
        raise StatusError(StatusCode.INVALID_ARGUMENT, "no value specified for input")
    if spec == "(ignored)" and allow_ignored:
        return [IGNORED]
    if spec in ("(null)", "(ignored)"):
        return [None if kind == "r" else (kind, 0)]
    if spec[0] in "@+*":
        return _parse_npy(spec, streams)
    if kind != "r":
        return [_parse_scalar(spec, kind)]
    return [parse_tensor(spec)]


def _parse_npy(spec: str, streams: NpyStreams) -> list:
    if not spec.endswith(".npy"):
        raise StatusError(StatusCode.UNIMPLEMENTED,
                          "only numpy (.npy) files are supported for metadata-less variant I/O")
    if spec[0] != "*":
        return [npy_tensor(streams.next_array(spec))]
    path, arrays = spec[1:], [npy_tensor(streams.next_array("+" + spec[1:]))]
    while not streams.at_end(path):
        arrays.append(npy_tensor(streams.next_array("+" + path)))
    return arrays


def _parse_scalar(text: str, kind: str) -> tuple:
    try:
        value = float(text) if kind in "fF" else int(text, 0)
    except ValueError:
        raise StatusError(StatusCode.INVALID_ARGUMENT,
                          f"parsing value `{text}` as {dict(i='i32', I='i64', f='f32', F='f64')[kind]}") \
            from None
    return kind, value


def to_host(value, kind: str):
    """A VM result as a host value."""
    if isinstance(value, BufferView):
        return HostTensor(value.to_numpy(), value.element_type)
    if kind in "iIfF":
        return kind, value
    return value


def format_value(value, max_element_count: int) -> str:
    """What iree-run-module prints after `result[i]: `."""
    if value is None:
        return "(null)"
    if isinstance(value, HostTensor):
        return "hal.buffer_view\n" + format_tensor(value, max_element_count)
    if isinstance(value, tuple):
        kind, number = value
        name = dict(i="i32", I="i64", f="f32", F="f64")[kind]
        return f"{name}={'%g' % number if kind in 'fF' else number}"
    if ref_type(value) == "vm.list":
        return "vm.list\n" + "".join(f"child_list[{i}]: {format_value(v, max_element_count)}\n"
                                     for i, v in enumerate(_list_items(value)))
    return f"{ref_type(value) or '?'}\n(no printer)"


def _list_items(vm_list) -> list:
    items = getattr(vm_list, "items", None)
    return [to_host(v, "r") for v in (items if items is not None else [])]


def print_results(results: list, max_element_count: int) -> None:
    for i, value in enumerate(results):
        sys.stdout.write(f"result[{i}]: {format_value(value, max_element_count)}\n")


def write_outputs(results: list, specs: list[str], max_element_count: int) -> None:
    if len(results) != len(specs):
        raise StatusError(StatusCode.OUT_OF_RANGE,
                          f"{len(specs)} outputs specified but the provided variant list only "
                          f"has {len(results)} elements")
    for value, spec in zip(results, specs):
        if spec == "-":
            sys.stdout.write(format_value(value, max_element_count) + "\n")
        elif spec:
            _write_file(value, spec)


def _write_file(value, spec: str) -> None:
    mode, path = spec[0], spec[1:]
    if mode not in "@+":
        raise StatusError(StatusCode.UNIMPLEMENTED,
                          f"unsupported output mode specification '{spec}'")
    array = _as_array(value)
    try:
        with open(path, "wb" if mode == "@" else "ab") as f:
            if path.endswith(".npy"):
                np.save(f, array, allow_pickle=False)
            else:
                f.write(array.tobytes())
    except OSError as error:
        raise StatusError(StatusCode.UNKNOWN,
                          f"unable to open file `{path}`: {error.strerror}") from None


def _as_array(value) -> np.ndarray:
    if isinstance(value, HostTensor):
        return value.array
    if isinstance(value, tuple):
        kind, number = value
        return np.array(number, dtype=dict(i=np.int32, I=np.int64, f=np.float32, F=np.float64)[kind])
    raise StatusError(StatusCode.UNIMPLEMENTED, "only tensors and scalars can be written to files")
