"""The hal module exposes exactly the stock 3.13 hal module's functions and cconvs."""
import re

import iree.runtime as rt

from hal_driver.device.driver import create_device
from hal_driver.hal import create_hal_module


def stock_hal_exports() -> dict[str, str]:
    instance = rt.VmInstance()
    module = rt.create_hal_module(instance, rt.get_device("local-sync"))
    exports = {}
    for name in module.function_names:
        match = re.search(r"\((0[^)]*)\)", repr(module.lookup_function(name)))
        exports[name] = match.group(1)
    return exports


def test_functions_and_cconvs_match_the_stock_hal_module():
    device = create_device()
    try:
        ours = {n: f.cconv for n, f in create_hal_module([device]).functions.items()}
    finally:
        device.close()
    assert ours == stock_hal_exports()
    assert len(ours) == 60
