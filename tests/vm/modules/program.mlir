// Control flow, calls, globals, buffers, lists and refs; every export returns
// values so results can be compared with iree.runtime.
vm.module @program {
  vm.global.i32 private mutable @counter = 7 : i32
  vm.global.i64 private mutable @big = 1099511627776 : i64
  vm.global.f32 private mutable @gf = 1.5 : f32
  vm.global.f64 private mutable @gd = 2.25 : f64
  vm.global.ref private mutable @gbuf : !vm.buffer
  vm.rodata private @bytes dense<[1, 2, 3, 250, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19]> : tensor<19xi8>

  vm.initializer {
    %c16 = vm.const.i64 16
    %c8 = vm.const.i32 8
    %b = vm.buffer.alloc %c16, %c8 : !vm.buffer
    vm.global.store.ref %b, @gbuf : !vm.buffer
    vm.return
  }

  // Loop with i32/i64/f32/f64 block arguments: exercises remaps of register pairs.
  vm.export @sum_loop
  vm.func @sum_loop(%n: i32) -> (i32, i64, f32, f64) {
    %c0 = vm.const.i32 0
    %c1 = vm.const.i32 1
    %z64 = vm.const.i64 0
    %zf = vm.const.f32 0.0
    %zd = vm.const.f64 0.0
    vm.br ^loop(%c0, %z64, %zf, %zd : i32, i64, f32, f64)
  ^loop(%i: i32, %acc: i64, %accf: f32, %accd: f64):
    %done = vm.cmp.lt.i32.s %i, %n : i32
    vm.cond_br %done, ^body, ^exit(%i, %acc, %accf, %accd : i32, i64, f32, f64)
  ^body:
    %i64 = vm.ext.i32.i64.s %i : i32 -> i64
    %sq = vm.mul.i64 %i64, %i64 : i64
    %big = vm.const.i64 4294967296
    %t = vm.add.i64 %sq, %big : i64
    %acc2 = vm.add.i64 %acc, %t : i64
    %fi = vm.cast.si32.f32 %i : i32 -> f32
    %tenth = vm.const.f32 0.1
    %ft = vm.mul.f32 %fi, %tenth : f32
    %accf2 = vm.add.f32 %accf, %ft : f32
    %di = vm.cast.si64.f64 %i64 : i64 -> f64
    %accd2 = vm.add.f64 %accd, %di : f64
    %i2 = vm.add.i32 %i, %c1 : i32
    vm.br ^loop(%i2, %acc2, %accf2, %accd2 : i32, i64, f32, f64)
  ^exit(%ri: i32, %r64: i64, %rf: f32, %rd: f64):
    vm.return %ri, %r64, %rf, %rd : i32, i64, f32, f64
  }

  // (Direct recursion makes iree-compile 3.13 hang, so calls are made from a loop.)
  vm.func private @fib_step(%a: i64, %b: i64) -> (i64, i64) attributes {inlining_policy = #util.inline.never} {
    %s = vm.add.i64 %a, %b : i64
    vm.return %b, %s : i64, i64
  }

  vm.export @fib
  vm.func @fib(%n: i32) -> i64 {
    %c0 = vm.const.i32 0
    %c1 = vm.const.i32 1
    %z = vm.const.i64 0
    %o = vm.const.i64 1
    vm.br ^loop(%c0, %z, %o : i32, i64, i64)
  ^loop(%i: i32, %a: i64, %b: i64):
    %more = vm.cmp.lt.i32.s %i, %n : i32
    vm.cond_br %more, ^body, ^exit
  ^body:
    %r:2 = vm.call @fib_step(%a, %b) : (i64, i64) -> (i64, i64)
    %i2 = vm.add.i32 %i, %c1 : i32
    vm.br ^loop(%i2, %r#0, %r#1 : i32, i64, i64)
  ^exit:
    vm.return %a : i64
  }

  // Arguments of every kind, placed by the callee's calling convention.
  vm.func private @shuffle(%a: i32, %b: i64, %c: f32, %r: !vm.buffer, %d: f64, %e: i32)
      -> (f64, i32, !vm.buffer, i64, f32, i32) attributes {inlining_policy = #util.inline.never} {
    vm.return %d, %e, %r, %b, %c, %a : f64, i32, !vm.buffer, i64, f32, i32
  }

  vm.export @mixed_call
  vm.func @mixed_call(%a: i32, %b: i64, %c: f32, %d: f64) -> (f64, i32, i64, f32, i32, i64) {
    %buf = vm.const.ref.rodata @bytes : !vm.buffer
    %c7 = vm.const.i32 7
    %r:6 = vm.call @shuffle(%a, %b, %c, %buf, %d, %c7)
        : (i32, i64, f32, !vm.buffer, f64, i32) -> (f64, i32, !vm.buffer, i64, f32, i32)
    %len = vm.buffer.length %r#2 : !vm.buffer -> i64
    vm.return %r#0, %r#1, %r#3, %r#4, %r#5, %len : f64, i32, i64, f32, i32, i64
  }

  vm.export @table
  vm.func @table(%i: i32) -> (i32, i32, i64, f32) {
    %c100 = vm.const.i32 100
    %c200 = vm.const.i32 200
    %c300 = vm.const.i32 300
    %s = vm.switch.i32 %i[%c100, %c200] else %c300 : i32
    %l0 = vm.const.i64 10000000000
    %l1 = vm.const.i64 -20000000000
    %l2 = vm.const.i64 30000000000
    %sl = vm.switch.i64 %i[%l0, %l1] else %l2 : i64
    %f0 = vm.const.f32 0.5
    %f1 = vm.const.f32 -1.5
    %f2 = vm.const.f32 3.0
    %sf = vm.switch.f32 %i[%f0, %f1] else %f2 : f32
    vm.br_table %i {
      default: ^bb1(%c300 : i32),
      0: ^bb1(%c100 : i32),
      1: ^bb2(%c200 : i32),
      2: ^bb2(%c100 : i32)
    }
  ^bb1(%x: i32):
    vm.return %x, %s, %sl, %sf : i32, i32, i64, f32
  ^bb2(%y: i32):
    %y2 = vm.add.i32 %y, %c100 : i32
    vm.return %y2, %s, %sl, %sf : i32, i32, i64, f32
  }

  vm.export @globals
  vm.func @globals(%x: i32, %y: i64, %z: f32, %w: f64) -> (i32, i64, f32, f64, i32, i64, f32, f64, i32) {
    %a0 = vm.global.load.i32 @counter : i32
    %b0 = vm.global.load.i64 @big : i64
    %c0 = vm.global.load.f32 @gf : f32
    %d0 = vm.global.load.f64 @gd : f64
    %a1 = vm.add.i32 %a0, %x : i32
    vm.global.store.i32 %a1, @counter : i32
    %b1 = vm.add.i64 %b0, %y : i64
    vm.global.store.i64 %b1, @big : i64
    %c1 = vm.add.f32 %c0, %z : f32
    vm.global.store.f32 %c1, @gf : f32
    %d1 = vm.add.f64 %d0, %w : f64
    vm.global.store.f64 %d1, @gd : f64
    %pa = vm.global.address @counter : !util.ptr<i32>
    %ia = vm.global.load.indirect.i32 %pa : !util.ptr<i32> -> i32
    %pb = vm.global.address @big : !util.ptr<i64>
    %ib = vm.global.load.indirect.i64 %pb : !util.ptr<i64> -> i64
    %pc = vm.global.address @gf : !util.ptr<f32>
    %ic = vm.global.load.indirect.f32 %pc : !util.ptr<f32> -> f32
    %pd = vm.global.address @gd : !util.ptr<f64>
    %id = vm.global.load.indirect.f64 %pd : !util.ptr<f64> -> f64
    %c5 = vm.const.i32 5
    vm.global.store.indirect.i32 %c5, %pa : i32 -> !util.ptr<i32>
    %buf = vm.global.load.ref @gbuf : !vm.buffer
    %nz = vm.cmp.nz.ref %buf : !vm.buffer
    vm.return %a1, %b1, %c1, %d1, %ia, %ib, %ic, %id, %nz : i32, i64, f32, f64, i32, i64, f32, f64, i32
  }

  vm.export @buffers
  vm.func @buffers(%v: i32, %w: i64, %f: f32, %d: f64) -> (i32, i32, i32, i32, i32, i64, f32, f64, i32, i32, i64, i64, i32, i64) {
    %c0 = vm.const.i64 0
    %c1 = vm.const.i64 1
    %c2 = vm.const.i64 2
    %c3 = vm.const.i64 3
    %c4 = vm.const.i64 4
    %c64 = vm.const.i64 64
    %align = vm.const.i32 16
    %buf = vm.buffer.alloc %c64, %align : !vm.buffer
    vm.buffer.store.i8 %v, %buf[%c3] : i32 -> !vm.buffer
    vm.buffer.store.i16 %v, %buf[%c2] : i32 -> !vm.buffer
    vm.buffer.store.i32 %v, %buf[%c2] : i32 -> !vm.buffer
    vm.buffer.store.i64 %w, %buf[%c2] : i64 -> !vm.buffer
    vm.buffer.store.f32 %f, %buf[%c3] : f32 -> !vm.buffer
    vm.buffer.store.f64 %d, %buf[%c4] : f64 -> !vm.buffer
    %l8u = vm.buffer.load.i8.u %buf[%c3] : !vm.buffer -> i32
    %l8s = vm.buffer.load.i8.s %buf[%c3] : !vm.buffer -> i32
    %l16u = vm.buffer.load.i16.u %buf[%c2] : !vm.buffer -> i32
    %l16s = vm.buffer.load.i16.s %buf[%c1] : !vm.buffer -> i32
    %l32 = vm.buffer.load.i32 %buf[%c2] : !vm.buffer -> i32
    %l64 = vm.buffer.load.i64 %buf[%c2] : !vm.buffer -> i64
    %lf = vm.buffer.load.f32 %buf[%c3] : !vm.buffer -> f32
    %ld = vm.buffer.load.f64 %buf[%c4] : !vm.buffer -> f64
    %ro = vm.const.ref.rodata @bytes : !vm.buffer
    %ro8 = vm.buffer.load.i8.s %ro[%c3] : !vm.buffer -> i32
    vm.buffer.fill.i16 %buf, %c1, %c2, %v : i32 -> !vm.buffer
    vm.buffer.fill.i8 %buf, %c0, %c1, %v : i32 -> !vm.buffer
    vm.buffer.fill.i32 %buf, %c4, %c1, %v : i32 -> !vm.buffer
    vm.buffer.fill.i64 %buf, %c3, %c1, %w : i64 -> !vm.buffer
    vm.buffer.fill.f32 %buf, %c2, %c1, %f : f32 -> !vm.buffer
    vm.buffer.fill.f64 %buf, %c4, %c1, %d : f64 -> !vm.buffer
    %c16 = vm.const.i64 16
    %c19 = vm.const.i64 19
    vm.buffer.copy %ro, %c1, %buf, %c16, %c16 : !vm.buffer -> !vm.buffer
    %cmp = vm.buffer.compare %ro, %c1, %buf, %c16, %c16 : !vm.buffer, !vm.buffer
    %clone = vm.buffer.clone %buf, %c4, %c16, %align : !vm.buffer -> !vm.buffer
    %clen = vm.buffer.length %clone : !vm.buffer -> i64
    %h1 = vm.buffer.hash %buf, %c0, %c64 : !vm.buffer -> i64
    %h2 = vm.buffer.hash %ro, %c0, %c19 : !vm.buffer -> i64
    %first = vm.buffer.load.i32 %buf[%c0] : !vm.buffer -> i32
    %last = vm.buffer.load.i64 %buf[%c4] : !vm.buffer -> i64
    vm.return %l8u, %l8s, %l16u, %l16s, %l32, %l64, %lf, %ld, %ro8, %cmp, %clen, %h1, %first, %h2
        : i32, i32, i32, i32, i32, i64, f32, f64, i32, i32, i64, i64, i32, i64
  }

  vm.export @lists
  vm.func @lists(%v: i32, %w: i64, %f: f32) -> (i32, i32, i64, f32, f64, i32, i32, i32, i64, i32) {
    %c0 = vm.const.i32 0
    %c1 = vm.const.i32 1
    %c2 = vm.const.i32 2
    %c3 = vm.const.i32 3
    %l = vm.list.alloc %c1 : (i32) -> !vm.list<i8>
    vm.list.reserve %l, %c3 : (!vm.list<i8>, i32)
    vm.list.resize %l, %c3 : (!vm.list<i8>, i32)
    vm.list.set.i32 %l, %c1, %v : (!vm.list<i8>, i32, i32)
    %g8 = vm.list.get.i32 %l, %c1 : (!vm.list<i8>, i32) -> i32
    %size = vm.list.size %l : (!vm.list<i8>) -> i32
    %lv = vm.list.alloc %c1 : (i32) -> !vm.list<?>
    vm.list.resize %lv, %c3 : (!vm.list<?>, i32)
    vm.list.set.i64 %lv, %c0, %w : (!vm.list<?>, i32, i64)
    vm.list.set.f32 %lv, %c1, %f : (!vm.list<?>, i32, f32)
    vm.list.set.ref %lv, %c2, %l : (!vm.list<?>, i32, !vm.list<i8>)
    %g64 = vm.list.get.i64 %lv, %c0 : (!vm.list<?>, i32) -> i64
    %gf = vm.list.get.f32 %lv, %c1 : (!vm.list<?>, i32) -> f32
    %gd = vm.list.get.f64 %lv, %c1 : (!vm.list<?>, i32) -> f64
    %gw = vm.list.get.i32 %lv, %c0 : (!vm.list<?>, i32) -> i32
    %back = vm.list.get.ref %lv, %c2 : (!vm.list<?>, i32) -> !vm.list<i8>
    %same = vm.cmp.eq.ref %back, %l : !vm.list<i8>
    %wrong = vm.list.get.ref %lv, %c2 : (!vm.list<?>, i32) -> !vm.buffer
    %isnull = vm.cmp.nz.ref %wrong : !vm.buffer
    %l64 = vm.list.alloc %c1 : (i32) -> !vm.list<i64>
    vm.list.resize %l64, %c1 : (!vm.list<i64>, i32)
    vm.list.set.i32 %l64, %c0, %v : (!vm.list<i64>, i32, i32)
    %sext = vm.list.get.i64 %l64, %c0 : (!vm.list<i64>, i32) -> i64
    vm.list.resize %lv, %c1 : (!vm.list<?>, i32)
    %size2 = vm.list.size %lv : (!vm.list<?>) -> i32
    vm.return %g8, %size, %g64, %gf, %gd, %gw, %same, %isnull, %sext, %size2
        : i32, i32, i64, f32, f64, i32, i32, i32, i64, i32
  }

  vm.export @refs
  vm.func @refs(%c: i32) -> (i32, i32, i64) {
    %a = vm.const.ref.rodata @bytes : !vm.buffer
    %c8 = vm.const.i64 8
    %c4 = vm.const.i32 4
    %b = vm.buffer.alloc %c8, %c4 : !vm.buffer
    %s = vm.select.ref %c, %a, %b : !vm.buffer
    %eq = vm.cmp.eq.ref %s, %a : !vm.buffer
    %ne = vm.cmp.ne.ref %s, %b : !vm.buffer
    %len = vm.buffer.length %s : !vm.buffer -> i64
    vm.return %eq, %ne, %len : i32, i32, i64
  }

  vm.export @fail_with
  vm.func @fail_with(%code: i32) -> i32 {
    %c1 = vm.const.i32 1
    %nz = vm.cmp.nz.i32 %code : i32
    vm.cond_br %nz, ^fail, ^ok
  ^fail:
    vm.fail %code, "requested failure"
  ^ok:
    vm.return %c1 : i32
  }

  vm.export @checked
  vm.func @checked(%a: i32, %b: i32) -> i32 {
    vm.check.eq %a, %b, "a must equal b" : i32
    vm.return %a : i32
  }

  vm.export @store_rodata
  vm.func @store_rodata(%v: i32) {
    %ro = vm.const.ref.rodata @bytes : !vm.buffer
    %c0 = vm.const.i64 0
    vm.buffer.store.i8 %v, %ro[%c0] : i32 -> !vm.buffer
    vm.return
  }

  vm.export @load_out_of_range
  vm.func @load_out_of_range(%i: i64) -> i32 {
    %ro = vm.const.ref.rodata @bytes : !vm.buffer
    %v = vm.buffer.load.i32 %ro[%i] : !vm.buffer -> i32
    vm.return %v : i32
  }

  vm.export @yields
  vm.func @yields(%n: i32) -> i32 {
    %c0 = vm.const.i32 0
    %c1 = vm.const.i32 1
    vm.br ^loop(%c0 : i32)
  ^loop(%i: i32):
    %more = vm.cmp.lt.i32.s %i, %n : i32
    vm.cond_br %more, ^body, ^exit
  ^body:
    %i2 = vm.add.i32 %i, %c1 : i32
    vm.yield ^loop(%i2 : i32)
  ^exit:
    vm.return %i : i32
  }
}
