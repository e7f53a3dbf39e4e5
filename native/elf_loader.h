/* A checking loader for the ELF shared objects that IREE's llvm-cpu backend emits
 * (embedded-elf-x86_64 and system-elf-x86_64 executable libraries).
 *
 * Why not dlopen: dlopen trusts its input (a corrupt file crashes or aborts the
 * process while loading) and runs the library's initialisers. This loader checks
 * every header, offset, size, symbol and relocation against the file and the mapped
 * image before it uses it, maps and relocates the image itself, never runs
 * initialisers, and refuses anything an IREE executable library does not need:
 *   - 64-bit little-endian x86-64 ET_DYN only; no PT_INTERP, no PT_TLS;
 *   - no DT_NEEDED library other than libm.so.6, no REL (only RELA) relocations;
 *   - relocation types NONE, 64, PC32, 32, 32S, PC64, GLOB_DAT, JUMP_SLOT, RELATIVE;
 *   - undefined symbols resolve only to functions of libm (system-elf libraries call
 *     fmaf, floorf, ... without naming libm); undefined weak symbols resolve to 0;
 *   - no page both writable and executable.
 * No library parses and maps ELF in C for us (pyelftools reads ELF in Python but does
 * not map or relocate), so this is our own code.
 */
#ifndef NPU_ELF_LOADER_H_
#define NPU_ELF_LOADER_H_

#include <stddef.h>
#include <stdint.h>

#define EL_MAX_SEGMENTS 16
#define EL_ERROR_CAPACITY 512

/* One PT_LOAD segment as mapped: [start, end) in the image, its protection. */
typedef struct el_segment {
  uint8_t* start;
  uint8_t* end;
  int readable, writable, executable;
} el_segment;

/* A mapped, relocated image. */
typedef struct el_image {
  uint8_t* map;          /* the mmap'ed region (page aligned) */
  size_t map_size;
  uint8_t* bias;         /* address of virtual address 0: map - first page vaddr */
  el_segment segments[EL_MAX_SEGMENTS];
  int segment_count;
  const uint8_t* symtab; /* dynamic symbols (Elf64_Sym), symbol_count of them */
  uint32_t symbol_count;
  const char* strtab;    /* dynamic string table, strtab_size bytes */
  size_t strtab_size;
} el_image;

/* Status codes (IREE status code values), as host_dispatch.h's. */
enum { EL_OK = 0, EL_INVALID_ARGUMENT = 3, EL_NOT_FOUND = 5,
       EL_RESOURCE_EXHAUSTED = 8, EL_UNIMPLEMENTED = 12 };

/* Checks, maps and relocates the |size| bytes at |data|. On failure returns a
 * status code, writes a message to |error| (EL_ERROR_CAPACITY bytes) and leaves
 * *image empty (el_unload is still safe to call). */
int el_load(const uint8_t* data, size_t size, el_image* image, char* error);

void el_unload(el_image* image);

/* The address of the defined function symbol |name| if it lies in an executable
 * segment, else NULL. */
void* el_lookup_function(const el_image* image, const char* name);

/* Nonzero if [p, p + n) lies in one readable segment. */
int el_readable(const el_image* image, const void* p, size_t n);

/* Nonzero if p lies in an executable segment. */
int el_executable(const el_image* image, const void* p);

/* Nonzero if p starts a NUL-terminated string inside one readable segment. */
int el_string(const el_image* image, const char* p);

#endif  /* NPU_ELF_LOADER_H_ */
