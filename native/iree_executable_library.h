/* Our own declarations of the IREE HAL executable library ABI, version 6: the layout
 * the stock llvm-cpu compiler emits (sizes checked with static asserts in
 * host_dispatch.c), used only by host_dispatch.c.
 */
#ifndef NPU_IREE_EXECUTABLE_LIBRARY_H_
#define NPU_IREE_EXECUTABLE_LIBRARY_H_

#include <stddef.h>
#include <stdint.h>

#define HD_LIBRARY_VERSION 6u
#define HD_QUERY_SYMBOL "iree_hal_executable_library_query"
#define HD_LOCAL_MEMORY_PAGE_SIZE 4096u
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

#endif  /* NPU_IREE_EXECUTABLE_LIBRARY_H_ */
