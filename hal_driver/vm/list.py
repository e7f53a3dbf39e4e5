"""`!vm.list<T>`: a growable list of values or refs.

`VmList(element_type)` where element_type is an IREE type name: a value type
(`i8`, `i16`, `i32`, `i64`, `f32`, `f64`), a ref type (`hal.buffer`, `vm.buffer`,
`vm.list`, with or without a leading `!`; `vm.list<...>` parameters are ignored like
IREE does), or `?` / `vm.opaque` / `any` for a variant list holding anything.
Storage is the Python list `.items` (ints, floats, refs or None); variant lists
keep each value's type in `.value_types`.

Semantics follow IREE's list: reading a value converts between integer widths and
between f32/f64 (any other conversion yields zero); value lists reject refs and
ref lists reject values with FAILED_PRECONDITION; setting a ref of the wrong type
into a typed ref list is INVALID_ARGUMENT; indices past the size are OUT_OF_RANGE.
"""
from hal_driver.status import StatusCode, StatusError
from hal_driver.vm import values
from hal_driver.vm.ref import VmRef, ref_type, ref_type_text

MAX_ELEMENTS = 1 << 24
VALUE_TYPES = ("i8", "i16", "i32", "i64", "f32", "f64")
_VARIANT_NAMES = ("?", "vm.opaque", "vm.ref<?>", "any", "")


def normalize_type(type_name: str | None) -> str:
    """IREE type name -> the name refs carry (`!vm.list<i32>` -> `vm.list`); `?` = any."""
    name = (type_name or "").lstrip("!")
    if name in _VARIANT_NAMES:
        return "?"
    if name.startswith("vm.list"):
        return "vm.list"
    return name


def ref_matches(ref, type_name: str) -> bool:
    """Whether `ref` (None or a ref) may be stored where `type_name` is declared."""
    return ref is None or type_name == "?" or ref_type(ref) == type_name


def convert_value(value, source_type: str, target_type: str):
    if source_type == target_type:
        return value
    source_int, target_int = source_type[0] == "i", target_type[0] == "i"
    if source_int and target_int:
        return values.wrap_int(value, int(target_type[1:]))
    if not source_int and not target_int:
        return values.to_f32(value) if target_type == "f32" else float(value)
    return 0 if target_int else 0.0


class VmList(VmRef):
    vm_type = "vm.list"

    def __init__(self, element_type: str = "?", items=()):
        self.element_type = normalize_type(element_type)
        self.items = []
        self.value_types = []
        for item in items:
            self.append(item)

    @property
    def is_value_list(self) -> bool:
        return self.element_type in VALUE_TYPES

    def __len__(self) -> int:
        return len(self.items)

    def __repr__(self) -> str:
        return f"VmList<{self.element_type}>({self.items!r})"

    def reserve(self, capacity: int) -> None:
        if capacity < 0:
            raise StatusError(StatusCode.OUT_OF_RANGE, f"invalid list capacity {capacity}")

    def resize(self, size: int) -> None:
        if size < 0:
            raise StatusError(StatusCode.OUT_OF_RANGE, f"invalid list size {size}")
        if size > MAX_ELEMENTS:
            raise StatusError(StatusCode.RESOURCE_EXHAUSTED, f"list of {size} elements exceeds the VM limit")
        del self.items[size:], self.value_types[size:]
        grow = size - len(self.items)
        if grow > 0:
            fill = 0.0 if self.element_type in ("f32", "f64") else (0 if self.is_value_list else None)
            self.items.extend([fill] * grow)
            self.value_types.extend([None] * grow)

    def _check_index(self, index: int) -> None:
        if not 0 <= index < len(self.items):
            raise StatusError(StatusCode.OUT_OF_RANGE, f"index {index} out of bounds ({len(self.items)})")

    def get_value(self, index: int, value_type: str):
        """Reads element `index` as `value_type` (e.g. `i32`)."""
        self._check_index(index)
        if self.is_value_list:
            return convert_value(self.items[index], self.element_type, value_type)
        stored = self.value_types[index] if self.element_type == "?" else None
        if stored is None:
            raise StatusError(StatusCode.FAILED_PRECONDITION, f"list element {index} is not a value")
        return convert_value(self.items[index], stored, value_type)

    def set_value(self, index: int, value, value_type: str) -> None:
        self._check_index(index)
        if self.is_value_list:
            self.items[index] = convert_value(value, value_type, self.element_type)
        elif self.element_type == "?":
            self.items[index] = value
            self.value_types[index] = value_type
        else:
            raise StatusError(StatusCode.FAILED_PRECONDITION, "list cannot store values")

    def get_ref(self, index: int):
        self._check_index(index)
        if self.is_value_list or self.value_types[index] is not None:
            raise StatusError(StatusCode.FAILED_PRECONDITION, f"list element {index} is not a ref")
        return self.items[index]

    def set_ref(self, index: int, ref) -> None:
        self._check_index(index)
        if self.is_value_list:
            raise StatusError(StatusCode.FAILED_PRECONDITION, "list cannot store refs")
        if not ref_matches(ref, self.element_type):
            raise StatusError(StatusCode.INVALID_ARGUMENT,
                              f"cannot store a `{ref_type_text(ref)}` ref in a list of `{self.element_type}`")
        self.items[index] = ref
        self.value_types[index] = None

    def append(self, item, value_type: str | None = None) -> None:
        """Appends a ref/None, or a number (typed by `value_type` or the list)."""
        index = len(self.items)
        self.resize(index + 1)
        if item is None or ref_type(item) is not None:
            self.set_ref(index, item)
        else:
            default = "f64" if isinstance(item, float) else "i64"
            self.set_value(index, item, value_type or (self.element_type if self.is_value_list else default))
