/* Host-CPU fallback: see host_dispatch.h. */
#define _GNU_SOURCE
#include "host_dispatch.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "elf_loader.h"
#include "fault_guard.h"
#include "guarded_memory.h"
#include "iree_executable_library.h"

_Static_assert(sizeof(hd_environment) == 96, "environment layout");
_Static_assert(sizeof(hd_dispatch_state) == 48, "dispatch_state layout");
_Static_assert(sizeof(hd_workgroup_state) == 32, "workgroup_state layout");
_Static_assert(sizeof(hd_dispatch_attrs) == 64, "dispatch_attrs layout");

struct hd_library {
  el_image image;               /* the mapped, relocated library */
  const hd_library_v6* v6;      /* tables returned by the query function */
  uint32_t* constants;          /* executable-level constants (copied per call) */
};

/* Far above what the compiler emits; bounds the checks of a corrupt table. */
#define HD_MAX_TABLE_ENTRIES 65536u

static int fail(char* error, int code, const char* format, ...) {
  va_list args;
  va_start(args, format);
  vsnprintf(error, HD_ERROR_CAPACITY, format, args);
  va_end(args);
  return code;
}

/* Imports are plain C calls on x86-64 Linux. */
static int call_import(hd_import_fn fn, void* params, void* context,
                       void* reserved) {
  return fn(params, context, reserved);
}

static int load_image(hd_library* library, const uint8_t* data, size_t size,
                      char* error) {
  char message[EL_ERROR_CAPACITY];
  int code = el_load(data, size, &library->image, message);
  if (code != EL_OK) return fail(error, code, "%s", message);
  return HD_OK;
}

/* Everything a call hands the library by pointer (environment, dispatch and
 * workgroup state, constants, import tables, binding tables, local memory) lives in
 * a mapping of its own (gm_map), rebuilt for each call: a stray write through one of
 * those pointers cannot reach our heap or stack. */
typedef struct call_area {
  uint8_t* base;
  size_t size;
  hd_environment* environment;
  hd_dispatch_state* dispatch_state;
  hd_workgroup_state* workgroup_state;
  uint32_t* constants;          /* push constants */
  void** binding_ptrs;
  size_t* binding_lengths;
  uint8_t* local_memory;
} call_area;

static size_t align64(size_t n) { return (n + 63) & ~(size_t)63; }

static int map_call_area(const hd_library* library, uint32_t constant_count,
                         uint32_t binding_count, size_t local_memory_size,
                         call_area* area) {
  uint32_t library_constants = library->v6 ? library->v6->constants.count : 0;
  uint32_t imports = library->v6 ? library->v6->imports.count : 0;
  size_t sizes[] = {sizeof(hd_environment), sizeof(hd_dispatch_state),
                    sizeof(hd_workgroup_state), library_constants * sizeof(uint32_t),
                    imports * sizeof(hd_import_fn), imports * sizeof(void*),
                    constant_count * sizeof(uint32_t), binding_count * sizeof(void*),
                    binding_count * sizeof(size_t)};
  uint8_t* parts[sizeof(sizes) / sizeof(sizes[0])];
  size_t offset = 0;
  for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); ++i) {
    parts[i] = (uint8_t*)offset;
    offset += align64(sizes[i]);
  }
  size_t local_offset = (offset + 4095) & ~(size_t)4095;
  area->size = local_offset + local_memory_size;
  area->base = gm_map(area->size);
  if (!area->base) return HD_RESOURCE_EXHAUSTED;
  for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); ++i) {
    parts[i] = area->base + (size_t)parts[i];
  }
  area->environment = (hd_environment*)parts[0];
  area->dispatch_state = (hd_dispatch_state*)parts[1];
  area->workgroup_state = (hd_workgroup_state*)parts[2];
  area->constants = (uint32_t*)parts[6];
  area->binding_ptrs = (void**)parts[7];
  area->binding_lengths = (size_t*)parts[8];
  area->local_memory = local_memory_size ? area->base + local_offset : NULL;
  hd_environment* env = area->environment;
  if (library_constants) {
    memcpy(parts[3], library->constants, library_constants * sizeof(uint32_t));
    env->constants = (const uint32_t*)parts[3];
  }
  if (imports) {  /* none is provided: every (optional) import stays NULL */
    env->import_thunk = call_import;
    env->import_funcs = (const hd_import_fn*)parts[4];
    env->import_contexts = (const void**)parts[5];
  }
  return HD_OK;
}

/* The query function runs library code: under the guard. */
typedef struct query_call {
  hd_query_fn query;
  const hd_environment* environment;
  const hd_library_header** result;
} query_call;

static void run_query(void* arg) {
  query_call* call = arg;
  call->result = call->query(HD_LIBRARY_VERSION, call->environment);
}

static int guard_failure(int guard, const fg_outcome* outcome, const char* what,
                         char* error) {
  if (guard == FG_FAULTED) {
    return fail(error, HD_INVALID_ARGUMENT,
                "%s raised signal %d (%s) at address %#lx; the executable is corrupt",
                what, outcome->signal, strsignal(outcome->signal),
                (unsigned long)outcome->address);
  }
  if (guard == FG_DEADLINE) {
    return fail(error, HD_DEADLINE_EXCEEDED, "%s did not return within %u ms", what,
                HD_QUERY_TIMEOUT_MS);
  }
  return fail(error, HD_INTERNAL, "could not set up the guard for %s", what);
}

static int query_library(hd_library* library, char* error) {
  query_call call = {
      .query = (hd_query_fn)el_lookup_function(&library->image, HD_QUERY_SYMBOL),
  };
  if (!call.query) {
    return fail(error, HD_INVALID_ARGUMENT,
                "not an IREE executable library: no `%s` function", HD_QUERY_SYMBOL);
  }
  call_area area;
  if (map_call_area(library, 0, 0, 0, &area) != HD_OK) {
    return fail(error, HD_RESOURCE_EXHAUSTED, "mapping the query's environment");
  }
  call.environment = area.environment;
  fg_outcome outcome;
  int guard = fg_run(run_query, &call, (uint64_t)HD_QUERY_TIMEOUT_MS * 1000000u,
                     &outcome);
  gm_unmap(area.base, area.size);
  if (guard != FG_COMPLETED) {
    return guard_failure(guard, &outcome, "the library's query function", error);
  }
  const el_image* image = &library->image;
  const hd_library_header** header = call.result;
  if (!header || !el_readable(image, header, sizeof(*header)) || !*header) {
    return fail(error, HD_FAILED_PRECONDITION,
                "executable library does not support ABI version %u",
                HD_LIBRARY_VERSION);
  }
  if (!el_readable(image, *header, sizeof(**header)) ||
      !el_readable(image, header, sizeof(hd_library_v6))) {
    return fail(error, HD_INVALID_ARGUMENT,
                "executable library's header lies outside the library");
  }
  if ((*header)->version != HD_LIBRARY_VERSION) {
    return fail(error, HD_FAILED_PRECONDITION,
                "executable library has ABI version %u; expected %u",
                (*header)->version, HD_LIBRARY_VERSION);
  }
  if ((*header)->sanitizer != 0) {
    return fail(error, HD_FAILED_PRECONDITION,
                "executable library was built with sanitizer kind %d; the "
                "host runtime has none", (*header)->sanitizer);
  }
  if ((*header)->name && !el_string(image, (*header)->name)) {
    return fail(error, HD_INVALID_ARGUMENT,
                "executable library's name lies outside the library");
  }
  library->v6 = (const hd_library_v6*)header;
  return HD_OK;
}

/* A table of |count| entries of |size| bytes at |p|, inside the library. */
static int table_ok(const el_image* image, const void* p, uint32_t count, size_t size) {
  return count <= HD_MAX_TABLE_ENTRIES && p && el_readable(image, p, count * size);
}

/* No imports are provided: optional ones ("?name") resolve to NULL and a
 * required one fails the load. */
static int resolve_imports(hd_library* library, char* error) {
  const hd_import_table* imports = &library->v6->imports;
  if (imports->count == 0) return HD_OK;
  if (!table_ok(&library->image, imports->symbols, imports->count, sizeof(char*))) {
    return fail(error, HD_INVALID_ARGUMENT,
                "import table (%u entries) lies outside the library", imports->count);
  }
  for (uint32_t i = 0; i < imports->count; ++i) {
    const char* symbol = imports->symbols[i];
    if (!symbol || !el_string(&library->image, symbol)) {
      return fail(error, HD_INVALID_ARGUMENT,
                  "import %u's name lies outside the library", i);
    }
    if (symbol[0] != '?') {
      return fail(error, HD_NOT_FOUND,
                  "executable requires import `%.64s`, which the host fallback "
                  "does not provide", symbol);
    }
  }
  return HD_OK;
}

static int set_constants(hd_library* library, const uint32_t* constants,
                         uint32_t constant_count, char* error) {
  uint32_t expected = library->v6->constants.count;
  if (constant_count != expected) {
    return fail(error, HD_INVALID_ARGUMENT,
                "executable declares %u constants; %u provided", expected,
                constant_count);
  }
  if (expected == 0) return HD_OK;
  library->constants = malloc(expected * sizeof(uint32_t));
  if (!library->constants) {
    return fail(error, HD_RESOURCE_EXHAUSTED, "allocating constants");
  }
  memcpy(library->constants, constants, expected * sizeof(uint32_t));
  return HD_OK;
}

static int check_exports(const hd_library* library, char* error) {
  const hd_export_table* exports = &library->v6->exports;
  const el_image* image = &library->image;
  if (exports->count == 0) return HD_OK;
  if (!table_ok(image, exports->ptrs, exports->count, sizeof(hd_dispatch_fn)) ||
      !table_ok(image, exports->attrs, exports->count, sizeof(hd_dispatch_attrs)) ||
      !table_ok(image, exports->names, exports->count, sizeof(char*))) {
    return fail(error, HD_INVALID_ARGUMENT,
                "export table (%u entries) is missing function pointers, attributes "
                "or names, or lies outside the library", exports->count);
  }
  for (uint32_t i = 0; i < exports->count; ++i) {
    if (!exports->ptrs[i] || !el_executable(image, (const void*)exports->ptrs[i])) {
      return fail(error, HD_INVALID_ARGUMENT,
                  "export %u's function is not code of the library", i);
    }
    if (!exports->names[i] || !el_string(image, exports->names[i])) {
      return fail(error, HD_INVALID_ARGUMENT,
                  "export %u's name lies outside the library", i);
    }
  }
  return HD_OK;
}

int hd_library_load(const uint8_t* data, size_t size,
                    const uint32_t* constants, uint32_t constant_count,
                    hd_library** out, char* error) {
  *out = NULL;
  error[0] = '\0';
  hd_library* library = calloc(1, sizeof(*library));
  if (!library) return fail(error, HD_RESOURCE_EXHAUSTED, "allocating library");
  int code = load_image(library, data, size, error);
  if (code == HD_OK) code = query_library(library, error);
  if (code == HD_OK) code = resolve_imports(library, error);
  if (code == HD_OK) code = set_constants(library, constants, constant_count,
                                          error);
  if (code == HD_OK) code = check_exports(library, error);
  if (code != HD_OK) {
    hd_library_free(library);
    return code;
  }
  *out = library;
  return HD_OK;
}

void hd_library_free(hd_library* library) {
  if (!library) return;
  el_unload(&library->image);
  free(library->constants);
  free(library);
}

const char* hd_library_name(const hd_library* library) {
  const char* name = library->v6->header->name;
  return name ? name : "";
}

uint32_t hd_library_export_count(const hd_library* library) {
  return library->v6->exports.count;
}

void hd_library_export_info(const hd_library* library, uint32_t ordinal,
                            hd_export_info* out) {
  const hd_export_table* exports = &library->v6->exports;
  const hd_dispatch_attrs* attrs = &exports->attrs[ordinal];
  out->name = exports->names[ordinal];
  out->flags = attrs->flags;
  out->local_memory_pages = attrs->local_memory_pages;
  out->constant_count = attrs->constant_count;
  out->binding_count = attrs->binding_count;
  out->workgroup_size[0] = attrs->workgroup_size_x;
  out->workgroup_size[1] = attrs->workgroup_size_y;
  out->workgroup_size[2] = attrs->workgroup_size_z;
}

/* The workgroup loop runs library code: under the guard. */
typedef struct grid_call {
  hd_dispatch_fn fn;
  const hd_environment* environment;
  const hd_dispatch_state* dispatch_state;
  hd_workgroup_state* workgroup_state;
  uint32_t count[3];
  volatile uint32_t workgroup_id[3];  /* the workgroup running (our copy) */
  int result;  /* the first non-zero workgroup result */
} grid_call;

static void run_grid(void* arg) {
  grid_call* call = arg;
  hd_workgroup_state* wg = call->workgroup_state;
  for (uint32_t z = 0; z < call->count[2]; ++z) {
    for (uint32_t y = 0; y < call->count[1]; ++y) {
      for (uint32_t x = 0; x < call->count[0]; ++x) {
        call->workgroup_id[0] = x;
        call->workgroup_id[1] = y;
        call->workgroup_id[2] = z;
        wg->workgroup_id_x = x;
        wg->workgroup_id_y = y;
        wg->workgroup_id_z = (uint16_t)z;
        call->result = call->fn(call->environment, call->dispatch_state, wg);
        if (call->result != 0) return;
      }
    }
  }
}

int hd_dispatch(const hd_library* library, uint32_t ordinal,
                uint32_t count_x, uint32_t count_y, uint32_t count_z,
                const uint32_t* constants, uint32_t constant_count,
                void* const* binding_ptrs, const size_t* binding_lengths,
                uint32_t binding_count, uint64_t timeout_ns,
                hd_dispatch_failure* failure) {
  const hd_export_table* exports = &library->v6->exports;
  const hd_dispatch_attrs* attrs = &exports->attrs[ordinal];
  size_t local_memory_size =
      (size_t)attrs->local_memory_pages * HD_LOCAL_MEMORY_PAGE_SIZE;
  call_area area;
  if (map_call_area(library, constant_count, binding_count, local_memory_size,
                    &area) != HD_OK) {
    return HD_DISPATCH_OUT_OF_MEMORY;
  }
  if (constant_count) memcpy(area.constants, constants, constant_count * sizeof(uint32_t));
  if (binding_count) {
    memcpy(area.binding_ptrs, binding_ptrs, binding_count * sizeof(void*));
    memcpy(area.binding_lengths, binding_lengths, binding_count * sizeof(size_t));
  }
  *area.dispatch_state = (hd_dispatch_state){
      .workgroup_size_x = attrs->workgroup_size_x,
      .workgroup_size_y = attrs->workgroup_size_y,
      .workgroup_size_z = attrs->workgroup_size_z,
      .constant_count = (uint16_t)constant_count,
      .workgroup_count_x = count_x,
      .workgroup_count_y = count_y,
      .workgroup_count_z = (uint16_t)count_z,
      .max_concurrency = 1,
      .binding_count = (uint8_t)binding_count,
      .constants = area.constants,
      .binding_ptrs = area.binding_ptrs,
      .binding_lengths = area.binding_lengths,
  };
  area.workgroup_state->local_memory = area.local_memory;
  area.workgroup_state->local_memory_size = (uint32_t)local_memory_size;
  grid_call call = {
      .fn = exports->ptrs[ordinal],
      .environment = area.environment,
      .dispatch_state = area.dispatch_state,
      .workgroup_state = area.workgroup_state,
      .count = {count_x, count_y, count_z},
  };
  fg_outcome outcome;
  int guard = fg_run(run_grid, &call, timeout_ns, &outcome);
  failure->result = call.result;
  for (int i = 0; i < 3; ++i) failure->workgroup_id[i] = call.workgroup_id[i];
  failure->signal = outcome.signal;
  failure->address = outcome.address;
  gm_unmap(area.base, area.size);
  switch (guard) {
    case FG_COMPLETED: return call.result ? HD_DISPATCH_WORKGROUP_FAILED : HD_DISPATCH_OK;
    case FG_FAULTED: return HD_DISPATCH_FAULTED;
    case FG_DEADLINE: return HD_DISPATCH_DEADLINE_EXCEEDED;
    default: return HD_DISPATCH_GUARD_FAILED;
  }
}
