"""The `check` VM module of IREE's e2e op tests (check.expect_*), and what a test run
records. `hal_driver/tools/check_module.py` is the iree-check-module that runs them."""
from hal_driver.check.module import CheckState, create_check_module

__all__ = ["CheckState", "create_check_module"]
