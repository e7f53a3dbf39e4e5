/* Failures, numbers in messages and scratch buffers of a run (npu_exec.h). */
#include "npu_exec.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

void* aligned_bytes(size_t bytes) {
  size_t rounded = (bytes + 63) & ~(size_t)63;
  return aligned_alloc(64, rounded ? rounded : 64);
}

int fail(exec_t* x, int status, const char* format, ...) {
  if (!x->error || x->error_capacity == 0) return status;
  int n = x->op ? snprintf(x->error, x->error_capacity, "instruction %zu (%s): ", x->index,
                           x->op->name)
                : snprintf(x->error, x->error_capacity, "instruction %zu: ", x->index);
  if (n >= 0 && (size_t)n < x->error_capacity) {
    va_list args;
    va_start(args, format);
    vsnprintf(x->error + n, x->error_capacity - (size_t)n, format, args);
    va_end(args);
  }
  return status;
}

num_t num(u128 v) {
  num_t out;
  char digits[48];
  int n = 0;
  do {
    digits[n++] = (char)('0' + (int)(v % 10));
    v /= 10;
  } while (v);
  for (int i = 0; i < n; i++) out.s[i] = digits[n - 1 - i];
  out.s[n] = 0;
  return out;
}

void* scratch(exec_t* x, int slot, u128 bytes) {
  npu_core_t* core = x->core;
  if (bytes > ((u128)1 << 40)) return NULL;
  if (core->scratch_bytes[slot] < (size_t)bytes) {
    free(core->scratch[slot]);
    core->scratch[slot] = aligned_bytes((size_t)bytes);
    core->scratch_bytes[slot] = core->scratch[slot] ? (size_t)bytes : 0;
  }
  return core->scratch[slot];
}

int out_of_memory(exec_t* x, u128 bytes) {
  return fail(x, NPU_STATUS_RESOURCE_EXHAUSTED, "cannot allocate %s bytes of scratch",
              num(bytes).s);
}
