"""The runner of IREE's VM op tests (iree_op_tests.py) on a .vmasm file of our own in
their style: test_* exports must return, fail_* must fail, and imports of
`yieldable_test` resume after the number of yields they were asked for."""
import pathlib

from .iree_op_tests import run_file

SOURCE = """
vm.module @yields version 0
vm.type i32
vm.import @yieldable_test.yield_n cconv "0ii_i"

vm.export @test_yield_n_returns_arg_plus_n
vm.func @test_yield_n_returns_arg_plus_n() -> () {
^bb0:
  %i0 = vm.const.i32 7
  %i1 = vm.const.i32 45
  %i2 = vm.const.i32 40
  %i3 = vm.const.i32 5
  vm.call.yieldable @yieldable_test.yield_n(%i2, %i3) -> ^bb1(%i2)
^bb1:
  %i1 = vm.cmp.ne.i32 %i2, %i1
  vm.cond_br %i1, ^bb3(), ^bb2()
^bb2:
  vm.return
^bb3:
  vm.fail %i0, "40+5=45"
}

vm.export @fail_always
vm.func @fail_always() -> () {
^bb0:
  %i0 = vm.const.i32 3
  vm.fail %i0, "expected"
}

vm.export @fail_but_returns
vm.func @fail_but_returns() -> () {
^bb0:
  vm.return
}

vm.export @test_but_fails
vm.func @test_but_fails() -> () {
^bb0:
  %i0 = vm.const.i32 3
  vm.fail %i0, "a test that fails"
}
"""


def test_runner_checks_test_and_fail_exports(tmp_path: pathlib.Path):
    source = tmp_path / "yields.vmasm"
    source.write_text(SOURCE)
    count, problems = run_file(source, tmp_path)
    assert count == 4
    assert problems[0] == "yields.fail_but_returns: returned; expected a failure"
    assert problems[1].startswith(
        "yields.test_but_fails: failed: INVALID_ARGUMENT; a test that fails")
    assert len(problems) == 2
