/* Host-CPU fallback: loads llvm-cpu executable libraries (IREE HAL executable
 * library ABI, version 6) from bytes with the checking loader of elf_loader.h and
 * runs their query and dispatch grids under the guard of fault_guard.h.
 *
 * The structs below are our own declarations of the ABI layout the stock
 * compiler emits (sizes checked with static asserts in host_dispatch.c).
 * Only host_dispatch.c and hal_driver/device/host_executable.py use them.
 */
#ifndef NPU_HOST_DISPATCH_H_
#define NPU_HOST_DISPATCH_H_

#include <stddef.h>
#include <stdint.h>

#define HD_LIBRARY_VERSION 6u
#define HD_QUERY_SYMBOL "iree_hal_executable_library_query"
#define HD_LOCAL_MEMORY_PAGE_SIZE 4096u
#define HD_ERROR_CAPACITY 512
/* The query function only returns a pointer to static tables. */
#define HD_QUERY_TIMEOUT_MS 1000u

/* ---- ABI structs (version 6) ------------------------------------------- */

typedef int (*hd_import_fn)(void* params, void* context, void* reserved);
typedef int (*hd_import_thunk_fn)(hd_import_fn fn, void* params, void* context,
                                  void* reserved);

typedef struct hd_environment {
  const uint32_t* constants;       /* executable-level constants */
  hd_import_thunk_fn import_thunk;
  const hd_import_fn* import_funcs;
  const void** import_contexts;
  uint64_t processor_data[8];      /* architecture-specific; zeros = unknown */
} hd_environment;                  /* 96 bytes */

typedef struct hd_dispatch_state {
  uint32_t workgroup_size_x;
  uint32_t workgroup_size_y;
  uint16_t workgroup_size_z;
  uint16_t constant_count;
  uint32_t workgroup_count_x;
  uint32_t workgroup_count_y;
  uint16_t workgroup_count_z;
  uint8_t max_concurrency;
  uint8_t binding_count;
  const uint32_t* constants;
  void* const* binding_ptrs;
  const size_t* binding_lengths;
} hd_dispatch_state;               /* 48 bytes */

typedef struct hd_workgroup_state {
  uint32_t workgroup_id_x;
  uint32_t workgroup_id_y;
  uint16_t workgroup_id_z;
  uint16_t reserved;
  uint32_t processor_id;
  void* local_memory;
  uint32_t local_memory_size;
} hd_workgroup_state;              /* 32 bytes */

typedef int (*hd_dispatch_fn)(const hd_environment* environment,
                              const hd_dispatch_state* dispatch_state,
                              const hd_workgroup_state* workgroup_state);

typedef struct hd_dispatch_attrs {
  uint64_t flags;
  uint16_t local_memory_pages;
  uint8_t constant_count;
  uint8_t binding_count;
  uint32_t workgroup_size_x;
  uint32_t workgroup_size_y;
  uint16_t workgroup_size_z;
  uint16_t parameter_count;
  uint64_t reserved[5];
} hd_dispatch_attrs;               /* 64 bytes */

typedef struct hd_library_header {
  uint32_t version;
  const char* name;
  uint32_t features;
  int32_t sanitizer;
} hd_library_header;

typedef struct hd_import_table {
  uint32_t count;
  const char* const* symbols;      /* "?name" marks an optional import */
} hd_import_table;

typedef struct hd_export_table {
  uint32_t count;
  const hd_dispatch_fn* ptrs;
  const hd_dispatch_attrs* attrs;
  const void* const* params;
  const void* occupancy;
  const char* const* names;
  const char* const* tags;
  const char* const* parameter_names;
  const void* source_locations;
  const void* stage_locations;
} hd_export_table;

typedef struct hd_constant_table {
  uint32_t count;
} hd_constant_table;

typedef struct hd_source_file_table {
  uint32_t count;
  const void* files;
} hd_source_file_table;

typedef struct hd_library_v6 {
  const hd_library_header* header;
  hd_import_table imports;
  hd_export_table exports;
  hd_constant_table constants;
  hd_source_file_table sources;
} hd_library_v6;

typedef const hd_library_header** (*hd_query_fn)(uint32_t max_version,
                                                 const hd_environment* env);

/* ---- Our API (declared again in build_host_dispatch.py's cdef) --------- */

/* A loaded library: its checked, mapped image (elf_loader.h), the environment
 * passed to every call and the library tables. */
typedef struct hd_library hd_library;

/* Information about one export, copied out of the library tables. */
typedef struct hd_export_info {
  const char* name;
  uint64_t flags;
  uint32_t local_memory_pages;
  uint32_t constant_count;
  uint32_t binding_count;
  uint32_t workgroup_size[3];
} hd_export_info;

/* Where a dispatch stopped: the workgroup that returned non-zero (result), faulted
 * (signal, address) or was running at the deadline. */
typedef struct hd_dispatch_failure {
  int result;
  uint32_t workgroup_id[3];
  int signal;
  uintptr_t address;
} hd_dispatch_failure;

/* Status codes returned by hd_library_load (IREE status code values). */
enum {
  HD_OK = 0,
  HD_INVALID_ARGUMENT = 3,
  HD_NOT_FOUND = 5,
  HD_RESOURCE_EXHAUSTED = 8,
  HD_FAILED_PRECONDITION = 9,
  HD_DEADLINE_EXCEEDED = 4,
  HD_UNIMPLEMENTED = 12,
  HD_INTERNAL = 13,
};

/* Loads a library from |size| bytes at |data| and queries it for version 6.
 * |constants| (|constant_count| values) are the executable-level constants;
 * the count must match the library's. On failure returns a status code,
 * writes a message to |error| (HD_ERROR_CAPACITY bytes) and sets *out NULL. */
int hd_library_load(const uint8_t* data, size_t size,
                    const uint32_t* constants, uint32_t constant_count,
                    hd_library** out, char* error);

void hd_library_free(hd_library* library);

const char* hd_library_name(const hd_library* library);
uint32_t hd_library_export_count(const hd_library* library);
void hd_library_export_info(const hd_library* library, uint32_t ordinal,
                            hd_export_info* out);

/* hd_dispatch results. */
enum {
  HD_DISPATCH_OK = 0,
  HD_DISPATCH_WORKGROUP_FAILED = 1, /* *failure says which and what it returned */
  HD_DISPATCH_OUT_OF_MEMORY = 2,    /* mapping the call's memory failed */
  HD_DISPATCH_FAULTED = 3,          /* a workgroup raised a fault signal */
  HD_DISPATCH_DEADLINE_EXCEEDED = 4,  /* stopped at the deadline */
  HD_DISPATCH_GUARD_FAILED = 5,     /* no timer or signal handler could be set up */
};

/* Runs every workgroup of the grid in x-fastest order on the calling thread,
 * stopping at the first workgroup that returns non-zero or faults, or at the
 * wall-clock deadline |timeout_ns| (0: none); see fault_guard.h. The caller has
 * checked the ordinal, counts and pointers against the export. */
int hd_dispatch(const hd_library* library, uint32_t ordinal,
                uint32_t count_x, uint32_t count_y, uint32_t count_z,
                const uint32_t* constants, uint32_t constant_count,
                void* const* binding_ptrs, const size_t* binding_lengths,
                uint32_t binding_count, uint64_t timeout_ns,
                hd_dispatch_failure* failure);

#endif  /* NPU_HOST_DISPATCH_H_ */
