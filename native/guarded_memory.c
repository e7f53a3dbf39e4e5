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

/* ---- Large regions: the last GM_LARGE_SLOTS released, up to GM_LARGE_BYTES in all,
 * reused by an acquire of the same size (a model's transient buffers come back with
 * the same sizes on every call; a fresh mapping pays a page fault per page) ---- */

static struct { uint8_t* region; size_t inner; } g_large[GM_LARGE_SLOTS];
static int g_large_count;
static size_t g_large_bytes;

/* A kept large region of exactly |inner| bytes, taken out of the cache, or NULL.
 * Called with g_pool_lock held. */
static uint8_t* take_large(size_t inner) {
  for (int i = 0; i < g_large_count; i++) {
    if (g_large[i].inner == inner) {
      uint8_t* region = g_large[i].region;
      g_large[i] = g_large[--g_large_count];
      g_large_bytes -= inner;
      return region;
    }
  }
  return NULL;
}

/* Keeps a released large region if the cache has room. Called with g_pool_lock held. */
static int keep_large(uint8_t* region, size_t inner) {
  if (g_large_count == GM_LARGE_SLOTS || g_large_bytes + inner > GM_LARGE_BYTES) return 0;
  g_large[g_large_count].region = region;
  g_large[g_large_count++].inner = inner;
  g_large_bytes += inner;
  return 1;
}

void* gm_acquire(size_t length, int zeroed) {
  size_t inner = inner_size(aligned_length(length));
  int cls = pool_class(inner);
  pthread_mutex_lock(&g_pool_lock);
  uint8_t* region = cls < 0 ? take_large(inner)
                            : g_pool_count[cls] > 0 ? g_pool[cls][--g_pool_count[cls]] : NULL;
  pthread_mutex_unlock(&g_pool_lock);
  if (region && zeroed) memset(region, 0, inner);
  if (!region) region = gm_map(inner);
  if (!region) return NULL;
  return region + inner - aligned_length(length);
}

void gm_release(void* p, size_t length) {
  if (!p) return;
  size_t inner = inner_size(aligned_length(length));
  uint8_t* region = (uint8_t*)p + aligned_length(length) - inner;
  int cls = pool_class(inner);
  pthread_mutex_lock(&g_pool_lock);
  int kept = cls < 0 ? keep_large(region, inner) : g_pool_count[cls] < POOL_DEPTH;
  if (kept && cls >= 0) g_pool[cls][g_pool_count[cls]++] = region;
  pthread_mutex_unlock(&g_pool_lock);
  if (!kept) gm_unmap(region, inner);
}
