"""`!vm.buffer`: a byte buffer the VM and the host share.

`VmBuffer(data)` wraps any bytes-like object without copying; `.data` is a flat
memoryview of it and `.mutable` says whether the VM may write (False for bytes and
for rodata segments, which are zero-copy read-only views into the module archive).
`VmBuffer.allocate(n)` makes a zeroed mutable buffer.

Offsets follow IREE: buffer.load/store/fill count elements of the access width;
buffer.copy/compare/clone/hash count bytes. Out-of-range accesses raise
OUT_OF_RANGE, writes to read-only buffers PERMISSION_DENIED.
"""
from hal_driver.status import StatusCode, StatusError
from hal_driver.vm.ref import VmRef


MAX_ALLOCATION = 1 << 30


class VmBuffer(VmRef):
    vm_type = "vm.buffer"

    def __init__(self, data, mutable: bool | None = None):
        view = memoryview(data).cast("B")
        if mutable is None:
            mutable = not view.readonly
        if mutable and view.readonly:
            raise StatusError(StatusCode.INVALID_ARGUMENT, "cannot make a mutable VmBuffer over read-only memory")
        self.data = view if mutable else view.toreadonly()
        self.mutable = mutable

    @classmethod
    def allocate(cls, length: int) -> "VmBuffer":
        if length < 0:
            raise StatusError(StatusCode.INVALID_ARGUMENT, f"invalid buffer length {length}")
        if length > MAX_ALLOCATION:
            raise StatusError(StatusCode.RESOURCE_EXHAUSTED, f"buffer of {length} bytes exceeds the VM limit")
        return cls(bytearray(length))

    def __len__(self) -> int:
        return len(self.data)

    def __repr__(self) -> str:
        return f"VmBuffer({len(self.data)} bytes, {'mutable' if self.mutable else 'read-only'})"

    def check_range(self, byte_offset: int, byte_length: int) -> None:
        if byte_offset < 0 or byte_length < 0 or byte_offset + byte_length > len(self.data):
            raise StatusError(StatusCode.OUT_OF_RANGE,
                              f"out-of-bounds access detected (offset={byte_offset}, length={byte_length}, "
                              f"buffer length={len(self.data)})")

    def check_writable(self) -> None:
        if not self.mutable:
            raise StatusError(StatusCode.PERMISSION_DENIED, "buffer is read-only and cannot be mapped for mutation")

    def read(self, byte_offset: int, byte_length: int) -> memoryview:
        self.check_range(byte_offset, byte_length)
        return self.data[byte_offset:byte_offset + byte_length]

    def write(self, byte_offset: int, payload) -> None:
        self.check_writable()
        self.check_range(byte_offset, len(payload))
        self.data[byte_offset:byte_offset + len(payload)] = payload


def _rotl(x: int, b: int) -> int:
    return ((x << b) | (x >> (64 - b))) & 0xFFFFFFFFFFFFFFFF


def siphash24(data: bytes) -> int:
    """SipHash-2-4 with the key bytes 00..0F, as vm.buffer.hash computes it (unsigned)."""
    mask = 0xFFFFFFFFFFFFFFFF
    k0, k1 = 0x0706050403020100, 0x0F0E0D0C0B0A0908
    v0, v1 = 0x736F6D6570736575 ^ k0, 0x646F72616E646F6D ^ k1
    v2, v3 = 0x6C7967656E657261 ^ k0, 0x7465646279746573 ^ k1

    def rounds(n):
        nonlocal v0, v1, v2, v3
        for _ in range(n):
            v0 = (v0 + v1) & mask
            v1 = _rotl(v1, 13) ^ v0
            v0 = _rotl(v0, 32)
            v2 = (v2 + v3) & mask
            v3 = _rotl(v3, 16) ^ v2
            v0 = (v0 + v3) & mask
            v3 = _rotl(v3, 21) ^ v0
            v2 = (v2 + v1) & mask
            v1 = _rotl(v1, 17) ^ v2
            v2 = _rotl(v2, 32)

    full = len(data) - len(data) % 8
    for i in range(0, full, 8):
        m = int.from_bytes(data[i:i + 8], "little")
        v3 ^= m
        rounds(2)
        v0 ^= m
    last = ((len(data) & 0xFF) << 56) | int.from_bytes(data[full:], "little")
    v3 ^= last
    rounds(2)
    v0 ^= last
    v2 ^= 0xFF
    rounds(4)
    return v0 ^ v1 ^ v2 ^ v3
