"""Which objects belong to the stock `iree.runtime` (every driver but npu-sim)."""
import iree.runtime


def is_stock(obj) -> bool:
    """Whether `obj` was made by the stock runtime (its types live in `iree.*`)."""
    return type(obj).__module__.split(".")[0] == "iree"


stock = iree.runtime
