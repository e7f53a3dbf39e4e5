/* Host-CPU fallback: see host_dispatch.h. */
#define _GNU_SOURCE
#include "host_dispatch.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

_Static_assert(sizeof(hd_environment) == 96, "environment layout");
_Static_assert(sizeof(hd_dispatch_state) == 48, "dispatch_state layout");
_Static_assert(sizeof(hd_workgroup_state) == 32, "workgroup_state layout");
_Static_assert(sizeof(hd_dispatch_attrs) == 64, "dispatch_attrs layout");

struct hd_library {
  int fd;                       /* memfd with the library bytes */
  void* handle;                 /* dlopen handle */
  const hd_library_v6* v6;      /* tables returned by the query function */
  hd_environment environment;   /* passed to every workgroup call */
  uint32_t* constants;          /* storage behind environment.constants */
  hd_import_fn* import_funcs;   /* storage behind environment.import_funcs */
  const void** import_contexts; /* storage behind environment.import_contexts */
};

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

/* system-elf libraries leave libm symbols (fmaf, floorf, ...) undefined
 * without a DT_NEEDED entry; make sure libm is in the global scope. */
static int ensure_libm_global(char* error) {
  static void* libm = NULL;
  if (!libm) libm = dlopen("libm.so.6", RTLD_NOW | RTLD_GLOBAL);
  if (!libm) return fail(error, HD_INTERNAL, "dlopen(libm.so.6): %s", dlerror());
  return HD_OK;
}

static int write_memfd(const uint8_t* data, size_t size, int* out_fd,
                       char* error) {
  int fd = memfd_create("iree-host-executable", MFD_CLOEXEC);
  if (fd < 0) {
    return fail(error, HD_RESOURCE_EXHAUSTED, "memfd_create: %s",
                strerror(errno));
  }
  size_t done = 0;
  while (done < size) {
    ssize_t n = write(fd, data + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int code = fail(error, HD_RESOURCE_EXHAUSTED, "writing memfd: %s",
                      strerror(errno));
      close(fd);
      return code;
    }
    done += (size_t)n;
  }
  *out_fd = fd;
  return HD_OK;
}

static int open_library(hd_library* library, char* error) {
  char path[64];
  snprintf(path, sizeof(path), "/proc/self/fd/%d", library->fd);
  library->handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!library->handle) {
    return fail(error, HD_INVALID_ARGUMENT, "dlopen failed: %s", dlerror());
  }
  return HD_OK;
}

static int query_library(hd_library* library, char* error) {
  hd_query_fn query = (hd_query_fn)dlsym(library->handle, HD_QUERY_SYMBOL);
  if (!query) {
    return fail(error, HD_INVALID_ARGUMENT,
                "not an IREE executable library: no `%s` symbol",
                HD_QUERY_SYMBOL);
  }
  const hd_library_header** header =
      query(HD_LIBRARY_VERSION, &library->environment);
  if (!header || !*header) {
    return fail(error, HD_FAILED_PRECONDITION,
                "executable library does not support ABI version %u",
                HD_LIBRARY_VERSION);
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
  library->v6 = (const hd_library_v6*)header;
  return HD_OK;
}

/* No imports are provided: optional ones ("?name") resolve to NULL and a
 * required one fails the load. */
static int resolve_imports(hd_library* library, char* error) {
  const hd_import_table* imports = &library->v6->imports;
  if (imports->count == 0) return HD_OK;
  if (!imports->symbols) {
    return fail(error, HD_INVALID_ARGUMENT, "import table has no symbols");
  }
  for (uint32_t i = 0; i < imports->count; ++i) {
    const char* symbol = imports->symbols[i];
    if (!symbol || symbol[0] != '?') {
      return fail(error, HD_NOT_FOUND,
                  "executable requires import `%s`, which the host fallback "
                  "does not provide", symbol ? symbol : "(null)");
    }
  }
  library->import_funcs = calloc(imports->count, sizeof(hd_import_fn));
  library->import_contexts = calloc(imports->count, sizeof(void*));
  if (!library->import_funcs || !library->import_contexts) {
    return fail(error, HD_RESOURCE_EXHAUSTED, "allocating import table");
  }
  library->environment.import_thunk = call_import;
  library->environment.import_funcs = library->import_funcs;
  library->environment.import_contexts = library->import_contexts;
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
  library->environment.constants = library->constants;
  return HD_OK;
}

static int check_exports(const hd_library* library, char* error) {
  const hd_export_table* exports = &library->v6->exports;
  if (exports->count == 0) return HD_OK;
  if (!exports->ptrs || !exports->attrs || !exports->names) {
    return fail(error, HD_INVALID_ARGUMENT,
                "export table is missing function pointers, attributes or "
                "names");
  }
  for (uint32_t i = 0; i < exports->count; ++i) {
    if (!exports->ptrs[i] || !exports->names[i]) {
      return fail(error, HD_INVALID_ARGUMENT,
                  "export %u has no function pointer or name", i);
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
  library->fd = -1;
  int code = ensure_libm_global(error);
  if (code == HD_OK) code = write_memfd(data, size, &library->fd, error);
  if (code == HD_OK) code = open_library(library, error);
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
  if (library->handle) dlclose(library->handle);
  if (library->fd >= 0) close(library->fd);
  free(library->constants);
  free(library->import_funcs);
  free(library->import_contexts);
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

int hd_dispatch(const hd_library* library, uint32_t ordinal,
                uint32_t count_x, uint32_t count_y, uint32_t count_z,
                const uint32_t* constants, uint32_t constant_count,
                void* const* binding_ptrs, const size_t* binding_lengths,
                uint32_t binding_count, hd_dispatch_failure* failure) {
  const hd_export_table* exports = &library->v6->exports;
  const hd_dispatch_attrs* attrs = &exports->attrs[ordinal];
  hd_dispatch_fn fn = exports->ptrs[ordinal];

  hd_dispatch_state dispatch_state = {
      .workgroup_size_x = attrs->workgroup_size_x,
      .workgroup_size_y = attrs->workgroup_size_y,
      .workgroup_size_z = attrs->workgroup_size_z,
      .constant_count = (uint16_t)constant_count,
      .workgroup_count_x = count_x,
      .workgroup_count_y = count_y,
      .workgroup_count_z = (uint16_t)count_z,
      .max_concurrency = 1,
      .binding_count = (uint8_t)binding_count,
      .constants = constants,
      .binding_ptrs = binding_ptrs,
      .binding_lengths = binding_lengths,
  };
  hd_workgroup_state workgroup_state = {0};
  uint32_t local_memory_size =
      attrs->local_memory_pages * HD_LOCAL_MEMORY_PAGE_SIZE;
  if (local_memory_size) {
    workgroup_state.local_memory = aligned_alloc(64, local_memory_size);
    if (!workgroup_state.local_memory) return HD_DISPATCH_OUT_OF_MEMORY;
    workgroup_state.local_memory_size = local_memory_size;
  }

  int status = HD_DISPATCH_OK;
  for (uint32_t z = 0; z < count_z && status == HD_DISPATCH_OK; ++z) {
    for (uint32_t y = 0; y < count_y && status == HD_DISPATCH_OK; ++y) {
      for (uint32_t x = 0; x < count_x; ++x) {
        workgroup_state.workgroup_id_x = x;
        workgroup_state.workgroup_id_y = y;
        workgroup_state.workgroup_id_z = (uint16_t)z;
        int result = fn(&library->environment, &dispatch_state,
                        &workgroup_state);
        if (result != 0) {
          failure->result = result;
          failure->workgroup_id[0] = x;
          failure->workgroup_id[1] = y;
          failure->workgroup_id[2] = z;
          status = HD_DISPATCH_WORKGROUP_FAILED;
          break;
        }
      }
    }
  }
  free(workgroup_state.local_memory);
  return status;
}
