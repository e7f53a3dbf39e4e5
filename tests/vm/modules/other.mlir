// A bytecode module that another bytecode module imports from.
vm.module @other {
  vm.global.i64 private mutable @calls = 0 : i64
  vm.export @twice
  vm.func @twice(%x: i64, %b: !vm.buffer) -> (i64, i64) {
    %c = vm.global.load.i64 @calls : i64
    %one = vm.const.i64 1
    %c1 = vm.add.i64 %c, %one : i64
    vm.global.store.i64 %c1, @calls : i64
    %y = vm.add.i64 %x, %x : i64
    %len = vm.buffer.length %b : !vm.buffer -> i64
    %z = vm.add.i64 %y, %len : i64
    vm.return %z, %c1 : i64, i64
  }
}
