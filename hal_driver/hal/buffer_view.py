"""hal.buffer_view.* imports."""
from executable_format.errors import excerpt
from hal_driver.device.buffer import Buffer
from hal_driver.device.buffer_view import BufferView, assert_view
from hal_driver.hal.refs import deref, vm_string
from hal_driver.status import StatusError


def create(state, buffer, source_offset, source_length, element_type, encoding_type, shape):
    buffer = deref(buffer, Buffer)
    if source_offset != 0 or source_length != buffer.byte_length:
        try:
            buffer = buffer.subspan(source_offset, source_length)
        except StatusError as status:
            raise status.annotate(f"invalid subspan of an existing buffer (source_offset="
                                  f"{source_offset}, length={source_length})") from None
    return BufferView(buffer, [d for (d,) in shape], element_type & 0xFFFFFFFF, encoding_type)


def assert_(state, view, message, element_type, encoding_type, shape):
    try:
        assert_view(deref(view, BufferView), element_type & 0xFFFFFFFF, encoding_type,
                    [d for (d,) in shape])
    except StatusError as error:     # the message is read only on failure (hot path)
        raise StatusError(error.code, f"{excerpt(vm_string(message))} {error.message}") from None


def buffer(state, view):
    return deref(view, BufferView).buffer


def element_type(state, view):
    value = deref(view, BufferView).element_type
    return value - (1 << 32) if value >= 1 << 31 else value


def encoding_type(state, view):
    return deref(view, BufferView).encoding_type


def rank(state, view):
    return deref(view, BufferView).rank


def dim(state, view, index):
    return deref(view, BufferView).dim(index)


def trace(state, key, views):
    """Buffer view tracing goes to a debug sink; npu-sim has none, as IREE's default."""
    for (view,) in views:
        deref(view, BufferView)


EXPORTS = {
    "buffer_view.create": create,
    "buffer_view.assert": assert_,
    "buffer_view.buffer": buffer,
    "buffer_view.element_type": element_type,
    "buffer_view.encoding_type": encoding_type,
    "buffer_view.rank": rank,
    "buffer_view.dim": dim,
    "buffer_view.trace": trace,
}
