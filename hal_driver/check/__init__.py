"""The `check` VM module of IREE's e2e op tests (check.expect_*), and what a test run
records. `hal_driver/tools/check_module.py` is the iree-check-module that runs them.

  module.py    the native module: exports, calling conventions, recorded failures
  compare.py   IREE's comparison rules and the element types each check accepts
  messages.py  IREE's (googletest's) failure texts
"""
from hal_driver.check.module import CheckFailure, CheckState, create_check_module

__all__ = ["CheckFailure", "CheckState", "create_check_module"]
