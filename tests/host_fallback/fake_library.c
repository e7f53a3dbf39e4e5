/* A hand-written executable library (ABI version 6) for tests of what the stock
 * compiler does not produce: failing workgroups, imports, executable constants,
 * local memory, other versions. Built by the tests with gcc; variants are selected
 * with -D:
 *   FAKE_VERSION=n        version in the header (the query accepts only n)
 *   FAKE_IMPORT="sym"     one import (a leading '?' makes it optional)
 *   FAKE_CONSTANTS=n      executable-level constant count
 *   FAKE_MISBEHAVE=1      three more exports: `segfault` (writes through NULL),
 *                         `spin` (never returns), `recurse` (overflows the stack)
 */
#include "iree_executable_library.h"

#ifndef FAKE_VERSION
#define FAKE_VERSION 6
#endif
#ifndef FAKE_CONSTANTS
#define FAKE_CONSTANTS 0
#endif

/* Binding 0 is a uint32_t array; each workgroup writes
 * executable constant 0 (if any) + push constant 0 + linear workgroup index
 * at its linear index, or fails if local memory is missing. */
static int record(const hd_environment* env, const hd_dispatch_state* ds,
                  const hd_workgroup_state* wg) {
  uint32_t* out = (uint32_t*)ds->binding_ptrs[0];
  uint32_t linear = (wg->workgroup_id_z * ds->workgroup_count_y +
                     wg->workgroup_id_y) * ds->workgroup_count_x +
                    wg->workgroup_id_x;
  if (!wg->local_memory || wg->local_memory_size < 2 * 4096) return 99;
  ((volatile uint8_t*)wg->local_memory)[2 * 4096 - 1] = 1;
  uint32_t base = FAKE_CONSTANTS ? env->constants[0] : 0;
  out[linear] = base + ds->constants[0] + linear;
  return 0;
}

/* Fails with 7 at workgroup (1, 2, 0). */
static int fail_at_1_2_0(const hd_environment* env, const hd_dispatch_state* ds,
                         const hd_workgroup_state* wg) {
  (void)env;
  (void)ds;
  return wg->workgroup_id_x == 1 && wg->workgroup_id_y == 2 ? 7 : 0;
}

#ifdef FAKE_MISBEHAVE
static int segfault(const hd_environment* env, const hd_dispatch_state* ds,
                    const hd_workgroup_state* wg) {
  (void)env;
  (void)ds;
  *(volatile int*)(uintptr_t)(wg->workgroup_id_x * 8) = 1;
  return 0;
}

static int spin(const hd_environment* env, const hd_dispatch_state* ds,
                const hd_workgroup_state* wg) {
  (void)env;
  (void)ds;
  for (volatile uint32_t i = wg->workgroup_id_x;; ++i) {}
  return 0;
}

static int recurse(const hd_environment* env, const hd_dispatch_state* ds,
                   const hd_workgroup_state* wg) {
  volatile char frame[4096];
  frame[0] = (char)wg->workgroup_id_x;
  return recurse(env, ds, wg) + frame[0];
}
#define MISBEHAVING_PTRS , segfault, spin, recurse
#define MISBEHAVING_NAMES , "segfault", "spin", "recurse"
#define MISBEHAVING_ATTRS , {.workgroup_size_x = 1}, {.workgroup_size_x = 1}, \
    {.workgroup_size_x = 1}
#define EXPORT_COUNT 5
#else
#define MISBEHAVING_PTRS
#define MISBEHAVING_NAMES
#define MISBEHAVING_ATTRS
#define EXPORT_COUNT 2
#endif

static const hd_dispatch_fn ptrs[] = {record, fail_at_1_2_0 MISBEHAVING_PTRS};
static const hd_dispatch_attrs attrs[] = {
    {.local_memory_pages = 2, .constant_count = 1, .binding_count = 1,
     .workgroup_size_x = 4, .workgroup_size_y = 2, .workgroup_size_z = 1},
    {.constant_count = 0, .binding_count = 0,
     .workgroup_size_x = 1, .workgroup_size_y = 1, .workgroup_size_z = 1}
    MISBEHAVING_ATTRS
};
static const char* const names[] = {"record", "fail_at_1_2_0" MISBEHAVING_NAMES};
#ifdef FAKE_IMPORT
static const char* const imports[] = {FAKE_IMPORT};
#define IMPORT_COUNT 1
#else
static const char* const* const imports = 0;
#define IMPORT_COUNT 0
#endif

static const hd_library_header header = {
    .version = FAKE_VERSION, .name = "fake", .features = 0, .sanitizer = 0};
static const hd_library_v6 library = {
    .header = &header,
    .imports = {.count = IMPORT_COUNT, .symbols = imports},
    .exports = {.count = EXPORT_COUNT, .ptrs = ptrs, .attrs = attrs, .names = names},
    .constants = {.count = FAKE_CONSTANTS},
};

const hd_library_header** iree_hal_executable_library_query(
    uint32_t max_version, const hd_environment* env) {
  (void)env;
  return max_version == FAKE_VERSION ? (const hd_library_header**)&library : 0;
}
