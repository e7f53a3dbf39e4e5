// Calls into a Python NativeModule `native` and a bytecode module `other`.
vm.module @imports {
  vm.import private @native.add(%a : i32, %b : i64) -> i64
  vm.import private @native.scale(%x : f32, %y : f64) -> (f32, f64)
  vm.import private @native.pack(%r : !vm.buffer, %xs : i32 ..., %pairs : tuple<i32, !vm.buffer> ...) -> i32
  vm.import private @native.make(%n : i32) -> !vm.buffer
  vm.import private @native.wait(%x : i32) -> i32 attributes {vm.yield}
  vm.import private optional @native.missing(%x : i32) -> i32
  vm.import private @other.twice(%x : i64, %b : !vm.buffer) -> (i64, i64)

  vm.rodata private @hello dense<[104, 105]> : tensor<2xi8>

  vm.export @scalars
  vm.func @scalars(%a: i32, %b: i64, %x: f32, %y: f64) -> (i64, f32, f64) {
    %s = vm.call @native.add(%a, %b) : (i32, i64) -> i64
    %r:2 = vm.call @native.scale(%x, %y) : (f32, f64) -> (f32, f64)
    vm.return %s, %r#0, %r#1 : i64, f32, f64
  }

  vm.export @variadic
  vm.func @variadic(%a: i32, %b: i32) -> i32 {
    %ro = vm.const.ref.rodata @hello : !vm.buffer
    %c3 = vm.const.i32 3
    %made = vm.call @native.make(%c3) : (i32) -> !vm.buffer
    %r = vm.call.variadic @native.pack(%ro, [%a, %b, %c3], [(%a, %made), (%b, %ro)])
        : (!vm.buffer, i32 ..., tuple<i32, !vm.buffer> ...) -> i32
    vm.return %r : i32
  }

  vm.export @variadic_empty
  vm.func @variadic_empty() -> i32 {
    %ro = vm.const.ref.rodata @hello : !vm.buffer
    %r = vm.call.variadic @native.pack(%ro, [], []) : (!vm.buffer, i32 ..., tuple<i32, !vm.buffer> ...) -> i32
    vm.return %r : i32
  }

  vm.export @waits
  vm.func @waits(%x: i32) -> i32 {
    vm.call.yieldable @native.wait(%x) : (i32) -> ^bb1(i32)
  ^bb1(%r: i32):
    %c1 = vm.const.i32 1
    %r1 = vm.add.i32 %r, %c1 : i32
    vm.return %r1 : i32
  }

  vm.export @optional
  vm.func @optional(%x: i32) -> (i32, i32) {
    %has = vm.import.resolved @native.missing : i32
    vm.cond_br %has, ^call, ^skip
  ^call:
    %r = vm.call @native.missing(%x) : (i32) -> i32
    vm.return %has, %r : i32, i32
  ^skip:
    vm.return %has, %x : i32, i32
  }

  vm.export @call_missing
  vm.func @call_missing(%x: i32) -> i32 {
    %r = vm.call @native.missing(%x) : (i32) -> i32
    vm.return %r : i32
  }

  vm.export @cross_module
  vm.func @cross_module(%x: i64) -> (i64, i64) {
    %ro = vm.const.ref.rodata @hello : !vm.buffer
    %r:2 = vm.call @other.twice(%x, %ro) : (i64, !vm.buffer) -> (i64, i64)
    vm.return %r#0, %r#1 : i64, i64
  }
}
