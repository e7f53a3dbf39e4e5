"""Calling conventions: `0` + argument types + `_` + result types.

Types: i (i32), I (i64), f (f32), F (f64), r (ref), v (void, only alone), and a
variadic span `C...D` whose members repeat once per span element. A parsed
convention is a tuple of items: a type character, or a tuple of characters for a span.
"""
from hal_driver.status import StatusCode, StatusError

_SCALARS = "iIfFr"


def _parse_types(text: str, what: str) -> tuple:
    if text == "v":
        return ()
    items = []
    i = 0
    while i < len(text):
        c = text[i]
        if c in _SCALARS:
            items.append(c)
            i += 1
        elif c == "C":
            end = text.find("D", i)
            span = text[i + 1:end]
            if end < 0 or not span or any(s not in _SCALARS for s in span):
                raise StatusError(StatusCode.INVALID_ARGUMENT, f"invalid span in {what} `{text}`")
            items.append(tuple(span))
            i = end + 1
        else:
            raise StatusError(StatusCode.INVALID_ARGUMENT, f"invalid type `{c}` in {what} `{text}`")
    return tuple(items)


def parse_cconv(cconv: str) -> tuple:
    """Returns (argument items, result items) of a calling convention string."""
    if not cconv or cconv[0] != "0" or "_" not in cconv:
        raise StatusError(StatusCode.INVALID_ARGUMENT, f"unsupported calling convention `{cconv}`")
    args, _, results = cconv[1:].partition("_")
    return _parse_types(args, "arguments"), _parse_types(results, "results")


def is_variadic(items: tuple) -> bool:
    return any(isinstance(item, tuple) for item in items)


def register_placement(types) -> list:
    """Maps each scalar type to its callee register: i32/f32 take the next i32
    register, i64/f64 the next even pair, refs the next ref register."""
    i32 = ref = 0
    placement = []
    for t in types:
        if t == "r":
            placement.append(ref)
            ref += 1
        elif t in "IF":
            i32 += i32 & 1
            placement.append(i32)
            i32 += 2
        else:
            placement.append(i32)
            i32 += 1
    return placement
