/* Guarded mappings and a pool of them: see guarded_memory.h. */
#define _GNU_SOURCE
#include "guarded_memory.h"

#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* Free regions kept per size class (pages); beyond this they are unmapped. */
#define POOL_DEPTH 32

static size_t page_size(void) {
  static size_t page;
  if (!page) page = (size_t)sysconf(_SC_PAGESIZE);
  return page;
}

/* The readable bytes of a region holding |size| bytes: whole pages, at least one. */
static size_t inner_size(size_t size) {
  size_t page = page_size();
  size_t inner = (size + page - 1) / page * page;
  return inner ? inner : page;
}

void* gm_map(size_t size) {
  size_t page = page_size(), inner = inner_size(size);
  uint8_t* map = mmap(NULL, inner + 2 * page, PROT_NONE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (map == MAP_FAILED) return NULL;
  if (mprotect(map + page, inner, PROT_READ | PROT_WRITE) != 0) {
    munmap(map, inner + 2 * page);
    return NULL;
  }
  return map + page;
}

void gm_unmap(void* p, size_t size) {
  if (!p) return;
  size_t page = page_size();
  munmap((uint8_t*)p - page, inner_size(size) + 2 * page);
}

/* ---- Pool: free regions of up to GM_POOLED_BYTES, a stack per page count ---- */

#define POOL_CLASSES (GM_POOLED_BYTES / 4096 + 1)
static pthread_mutex_t g_pool_lock = PTHREAD_MUTEX_INITIALIZER;
static void* g_pool[POOL_CLASSES][POOL_DEPTH];
static int g_pool_count[POOL_CLASSES];

static size_t aligned_length(size_t length) { return (length + 63) & ~(size_t)63; }

/* The pool class of a region with |inner| readable bytes, or -1 if not pooled. */
static int pool_class(size_t inner) {
  size_t pages = inner / page_size();
  return inner <= GM_POOLED_BYTES && pages < POOL_CLASSES ? (int)pages : -1;
}

void* gm_acquire(size_t length, int zeroed) {
  size_t inner = inner_size(aligned_length(length));
  int cls = pool_class(inner);
  uint8_t* region = NULL;
  if (cls >= 0) {
    pthread_mutex_lock(&g_pool_lock);
    if (g_pool_count[cls] > 0) region = g_pool[cls][--g_pool_count[cls]];
    pthread_mutex_unlock(&g_pool_lock);
    if (region && zeroed) memset(region, 0, inner);
  }
  if (!region) region = gm_map(inner);
  if (!region) return NULL;
  return region + inner - aligned_length(length);
}

void gm_release(void* p, size_t length) {
  if (!p) return;
  size_t inner = inner_size(aligned_length(length));
  uint8_t* region = (uint8_t*)p + aligned_length(length) - inner;
  int cls = pool_class(inner);
  if (cls >= 0) {
    pthread_mutex_lock(&g_pool_lock);
    int kept = g_pool_count[cls] < POOL_DEPTH;
    if (kept) g_pool[cls][g_pool_count[cls]++] = region;
    pthread_mutex_unlock(&g_pool_lock);
    if (kept) return;
  }
  gm_unmap(region, inner);
}
