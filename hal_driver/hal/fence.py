"""hal.fence.* imports. `fence.await` blocks the calling thread (IREE's hal module
also runs synchronously) until every fence is reached, a fence fails, or the timeout."""
from hal_driver.device.device import Device
from hal_driver.device.fence import Fence
from hal_driver.hal.refs import deref, deref_or_null
from hal_driver.status import StatusCode, StatusError, known_status_code

INFINITE_TIMEOUT_MS = 0xFFFFFFFF


def create(state, device, flags):
    semaphore = deref(device, Device).create_semaphore(0)
    return Fence([(semaphore, 1)])


def join(state, flags, fences):
    joined = Fence.join(deref_or_null(fence, Fence) for (fence,) in fences)
    return joined if joined.timepoints else None


def query(state, fence):
    """0 when reached, DEFERRED while pending, the failure's code when failed."""
    try:
        return int(StatusCode.OK if deref(fence, Fence).query() else StatusCode.DEFERRED)
    except StatusError as status:
        return int(status.code)


def signal(state, fence):
    deref(fence, Fence).signal()


def fail(state, fence, status_code):
    code = known_status_code(status_code & 0x1F) or StatusCode.UNKNOWN
    deref(fence, Fence).fail(StatusError(code, "fence failed by the program (hal.fence.fail)"))


def await_(state, timeout_millis, flags, fences):
    """Returns 0 or DEADLINE_EXCEEDED; a failed fence raises its failure status."""
    timeout_millis &= 0xFFFFFFFF
    timeout = None if timeout_millis == INFINITE_TIMEOUT_MS else timeout_millis / 1000
    joined = Fence.join(deref_or_null(fence, Fence) for (fence,) in fences)
    try:
        joined.wait(timeout)
    except StatusError as status:
        if status.code == StatusCode.DEADLINE_EXCEEDED:
            return int(StatusCode.DEADLINE_EXCEEDED)
        raise
    return 0


EXPORTS = {
    "fence.create": create,
    "fence.join": join,
    "fence.query": query,
    "fence.signal": signal,
    "fence.fail": fail,
    "fence.await": await_,
}
