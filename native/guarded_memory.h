/* Memory that untrusted host code (host-fallback executable libraries) is given
 * pointers to, in mappings of its own with a PROT_NONE guard page on each side.
 *
 * A library whose code is corrupt may run past the end of a binding or write
 * through a pointer we passed it. In malloc'd memory that corrupts the heap and the
 * process dies later, somewhere else; here the write lands in memory that belongs to
 * nobody else or faults on a guard page, which the fault guard (fault_guard.h) turns
 * into a failed dispatch.
 */
#ifndef NPU_GUARDED_MEMORY_H_
#define NPU_GUARDED_MEMORY_H_

#include <stddef.h>

/* A zeroed mapping of |size| bytes (page aligned) between two guard pages; NULL on
 * failure. For memory of one call. */
void* gm_map(size_t size);
void gm_unmap(void* p, size_t size);

/* |length| bytes, 64-byte aligned, that end within 63 bytes of the trailing guard
 * page; zeroed if |zeroed|. For device allocations: regions of up to
 * GM_POOLED_BYTES are kept after release and reused, so an allocation costs no
 * system call in the steady state; of the bigger ones, the last GM_LARGE_SLOTS
 * released (GM_LARGE_BYTES in all) are kept for an acquire of the same size. NULL on
 * failure. */
void* gm_acquire(size_t length, int zeroed);
/* Releases what gm_acquire(length, ...) returned. */
void gm_release(void* p, size_t length);

#define GM_POOLED_BYTES 1048576   /* 1 MiB */
#define GM_LARGE_SLOTS 16
#define GM_LARGE_BYTES 268435456   /* 256 MiB */

#endif  /* NPU_GUARDED_MEMORY_H_ */
