"""`benchmark_module` as iree.runtime's: it runs iree-benchmark-module and returns the
rows of its JSON report as `BenchmarkResult`s. With `device="npu-sim"` the tool is this
project's (`iree-npu-benchmark-module`, whose rows also carry the simulated NPU time,
cycles and dispatches per iteration); other devices run the stock tool."""
import os
import sys

from hal_driver.device.driver import is_npu_sim_uri
from hal_driver.iree_runtime_api.stock import stock
from hal_driver.iree_runtime_api.vm import VmModule, to_stock_module

NPU_SIM_TOOL = os.path.join(os.path.dirname(sys.executable), "iree-npu-benchmark-module")


def benchmark_module(module, entry_function=None, inputs=None, timeout=None, executable=None,
                     **kwargs):
    if isinstance(module, VmModule):   # handed over as its flatbuffer, as stock does
        module = to_stock_module(module, stock.VmInstance())
    if executable is None and is_npu_sim_uri(str(kwargs.get("device", ""))):
        executable = NPU_SIM_TOOL
    return stock.benchmark_module(module, entry_function, inputs, timeout, executable, **kwargs)
