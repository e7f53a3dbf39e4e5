import zlib

import numpy as np
import pytest

from executable_format.machine import MachineConfig
from hal_driver.device.npu_core import NpuCore


@pytest.fixture(scope="session")
def core():
    return NpuCore(MachineConfig())


@pytest.fixture
def rng(request):
    return np.random.default_rng(zlib.crc32(request.node.name.encode()))
