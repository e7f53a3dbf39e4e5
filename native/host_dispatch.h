/* Host-CPU fallback: loads llvm-cpu executable libraries (IREE HAL executable
 * library ABI, version 6: iree_executable_library.h) from bytes with the checking
 * loader of elf_loader.h and runs their query and dispatch grids under the guard of
 * fault_guard.h.
 *
 * This header is the extension's API: build_host_dispatch.py takes its cffi
 * declarations from it (header_cdef.py), so it holds nothing cffi cannot declare.
 */
#ifndef NPU_HOST_DISPATCH_H_
#define NPU_HOST_DISPATCH_H_

#include <stddef.h>
#include <stdint.h>

#define HD_ERROR_CAPACITY 512

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
