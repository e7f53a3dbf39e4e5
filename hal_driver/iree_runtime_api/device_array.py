"""`DeviceArray` and `asdevicearray` with iree.runtime's behaviour, over npu-sim buffer
views. The data stays in npu-sim memory: passing a DeviceArray to a function moves no
bytes; `to_host()` (or numpy asking for the values) copies it out once and keeps the
copy. Transfers are counted in the device statistics (`host_to_device_bytes`,
`device_to_host_bytes`)."""
import numpy as np
import numpy.lib.mixins

from hal_driver.device import element_type as et
from hal_driver.device.buffer_view import BufferView
from hal_driver.iree_runtime_api.stock import is_stock, stock
from hal_driver.runtime import array_from_buffer_view, buffer_view_from_array
from hal_driver.status import StatusError

_DEVICE_HANDLED_FUNCTIONS = {}


class DeviceArray(numpy.lib.mixins.NDArrayOperatorsMixin):
    def __init__(self, device, buffer_view: BufferView, implicit_host_transfer: bool = False,
                 override_dtype=None):
        self._device = device
        self._buffer_view = buffer_view
        self._implicit_host_transfer = implicit_host_transfer
        self._override_dtype = override_dtype
        self._host_array = None

    @property
    def buffer_view(self) -> BufferView:
        return self._buffer_view

    def __array__(self, dtype=None, copy=None):
        host_array = self._transfer_to_host(True)
        return host_array if dtype is None else host_array.astype(dtype)

    def __array_function__(self, func, types, args, kwargs):
        if func in _DEVICE_HANDLED_FUNCTIONS:
            return _DEVICE_HANDLED_FUNCTIONS[func](*args, **kwargs)
        return self.to_host().__array_function__(func, types, args, kwargs)

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        def transfer(value):
            return value._transfer_to_host(True) if isinstance(value, DeviceArray) else value
        if kwargs.get("out") is not None:
            kwargs = dict(kwargs, out=tuple(transfer(v) for v in kwargs["out"]))
        return getattr(ufunc, method)(*[transfer(v) for v in inputs], **kwargs)

    def __repr__(self) -> str:
        return f"<IREE DeviceArray: shape={np.shape(self)}, dtype={self.dtype}>"

    @property
    def is_host_accessible(self) -> bool:
        return self._host_array is not None

    def to_host(self) -> np.ndarray:
        return self._transfer_to_host(False)

    def _transfer_to_host(self, implicit: bool) -> np.ndarray:
        if implicit and not self._implicit_host_transfer:
            raise ValueError("DeviceArray cannot be implicitly transferred to the host: "
                             "if necessary, do an explicit transfer via .to_host()")
        if self._host_array is None:
            array = array_from_buffer_view(self._device, self._buffer_view)
            if self._override_dtype is not None and self._override_dtype != array.dtype:
                array = array.astype(self._override_dtype)
            self._host_array = array
        return self._host_array

    @property
    def dtype(self):
        if self._override_dtype is not None:
            return self._override_dtype
        return et.to_dtype(self._buffer_view.element_type)

    @property
    def shape(self):
        return np.shape(self)

    def astype(self, dtype, casting="unsafe", copy=True):
        if self.dtype == dtype and not copy:
            return self
        return self.to_host().astype(dtype, casting=casting, copy=copy)

    def reshape(self, *args):
        return self.to_host().reshape(*args)

    def __iter__(self):
        return self.to_host().__iter__()

    def __getitem__(self, index):
        return self.to_host().__getitem__(index)

    def __deepcopy__(self, memo):
        return self.to_host()

    def __reduce__(self):
        return _restore_reduced_array, (self.to_host(),)


def _restore_reduced_array(array):
    return array


def _device_implements(np_function):
    def decorator(func):
        _DEVICE_HANDLED_FUNCTIONS[np_function] = func
        return func
    return decorator


@_device_implements(np.shape)
def _shape(array: DeviceArray):
    return list(array._buffer_view.shape)   # a list, as the stock buffer view's shape


@_device_implements(np.reshape)
def _reshape(array: DeviceArray, *args):
    return array.reshape(*args)


def asdevicearray(device, a, dtype=None, *, implicit_host_transfer: bool = False,
                  memory_type=None, allowed_usage=None, element_type=None) -> DeviceArray:
    """A DeviceArray of `a` on `device` (a copy into device memory unless `a` already is
    one); the memory type and usage hints are ignored (npu-sim memory is unified)."""
    if is_stock(device):
        hints = {name: value for name, value in (("memory_type", memory_type),
                 ("allowed_usage", allowed_usage), ("element_type", element_type))
                 if value is not None}
        return stock.asdevicearray(device, a, dtype, implicit_host_transfer=implicit_host_transfer,
                                   **hints)
    if isinstance(a, DeviceArray) and dtype is None:
        return a
    a = np.asarray(a, dtype=dtype, order="C")
    try:
        view = buffer_view_from_array(device, a,
                                      None if element_type is None else int(element_type))
    except StatusError:
        raise ValueError(f"Could not map dtype {a.dtype} to IREE element type") from None
    return DeviceArray(device, view, implicit_host_transfer=implicit_host_transfer,
                       override_dtype=a.dtype)
