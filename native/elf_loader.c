/* Checking ELF loader: see elf_loader.h. Every value read from the file is checked
 * before it is used: offsets and sizes against the file, addresses against the
 * mapped segments, indices against their tables. */
#define _GNU_SOURCE
#include "elf_loader.h"

#include <dlfcn.h>
#include <elf.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* Far above any executable library IREE emits; keeps a corrupt size from reserving
 * the address space. */
#define EL_MAX_IMAGE_SIZE ((uint64_t)1 << 30)

static int fail(char* error, int code, const char* format, ...) {
  va_list args;
  va_start(args, format);
  vsnprintf(error, EL_ERROR_CAPACITY, format, args);
  va_end(args);
  return code;
}

/* [offset, offset + n) within [0, size), without overflow. */
static int in_range(uint64_t offset, uint64_t n, uint64_t size) {
  return offset <= size && n <= size - offset;
}

/* ---- Headers ------------------------------------------------------------- */

static int check_header(const uint8_t* data, size_t size, const Elf64_Ehdr** out,
                        char* error) {
  if (size < EI_NIDENT || memcmp(data, ELFMAG, SELFMAG) != 0) {
    return fail(error, EL_INVALID_ARGUMENT, "host executable data is not an ELF file");
  }
  const Elf64_Ehdr* eh = (const Elf64_Ehdr*)data;
  if (size < sizeof(*eh) || data[EI_CLASS] != ELFCLASS64 ||
      data[EI_DATA] != ELFDATA2LSB || eh->e_machine != EM_X86_64) {
    return fail(error, EL_INVALID_ARGUMENT,
                "host executable is not a 64-bit little-endian x86-64 ELF "
                "(class %u, data %u, machine %u)", data[EI_CLASS], data[EI_DATA],
                size >= 20 ? (unsigned)(data[18] | data[19] << 8) : 0u);
  }
  if (eh->e_type != ET_DYN) {
    return fail(error, EL_INVALID_ARGUMENT,
                "host executable is ELF type %u; an executable library is a shared "
                "object (ET_DYN)", eh->e_type);
  }
  if (eh->e_phentsize != sizeof(Elf64_Phdr) || eh->e_phnum == 0 ||
      !in_range(eh->e_phoff, (uint64_t)eh->e_phnum * sizeof(Elf64_Phdr), size) ||
      eh->e_phoff % 8 != 0) {
    return fail(error, EL_INVALID_ARGUMENT,
                "host executable's program headers (offset %llu, %u entries of %u "
                "bytes) do not lie in its %zu bytes",
                (unsigned long long)eh->e_phoff, eh->e_phnum, eh->e_phentsize, size);
  }
  *out = eh;
  return EL_OK;
}

typedef struct layout {
  const Elf64_Phdr* loads[EL_MAX_SEGMENTS];
  int load_count;
  const Elf64_Phdr* dynamic;
  uint64_t first_page;  /* page-aligned lowest vaddr */
  uint64_t end;         /* highest vaddr + memsz */
} layout;

static int check_load(const Elf64_Phdr* ph, size_t size, int index, char* error) {
  if (!in_range(ph->p_offset, ph->p_filesz, size) || ph->p_filesz > ph->p_memsz ||
      ph->p_memsz > EL_MAX_IMAGE_SIZE || ph->p_vaddr > EL_MAX_IMAGE_SIZE) {
    return fail(error, EL_INVALID_ARGUMENT,
                "host executable segment %d (offset %llu, file size %llu, memory size "
                "%llu, address %#llx) does not fit its %zu bytes", index,
                (unsigned long long)ph->p_offset, (unsigned long long)ph->p_filesz,
                (unsigned long long)ph->p_memsz, (unsigned long long)ph->p_vaddr, size);
  }
  if ((ph->p_flags & PF_W) && (ph->p_flags & PF_X)) {
    return fail(error, EL_INVALID_ARGUMENT,
                "host executable segment %d is writable and executable", index);
  }
  return EL_OK;
}

static int read_layout(const uint8_t* data, size_t size, const Elf64_Ehdr* eh,
                       uint64_t page, layout* out, char* error) {
  const Elf64_Phdr* phdrs = (const Elf64_Phdr*)(data + eh->e_phoff);
  memset(out, 0, sizeof(*out));
  out->first_page = UINT64_MAX;
  for (int i = 0; i < eh->e_phnum; ++i) {
    const Elf64_Phdr* ph = &phdrs[i];
    if (ph->p_type == PT_INTERP || ph->p_type == PT_TLS) {
      return fail(error, EL_UNIMPLEMENTED,
                  "host executable has a %s segment; executable libraries have none",
                  ph->p_type == PT_INTERP ? "PT_INTERP" : "PT_TLS");
    }
    if (ph->p_type == PT_DYNAMIC) out->dynamic = ph;
    if (ph->p_type != PT_LOAD || ph->p_memsz == 0) continue;
    int code = check_load(ph, size, i, error);
    if (code != EL_OK) return code;
    if (out->load_count == EL_MAX_SEGMENTS) {
      return fail(error, EL_INVALID_ARGUMENT,
                  "host executable has more than %d loadable segments",
                  EL_MAX_SEGMENTS);
    }
    out->loads[out->load_count++] = ph;
    uint64_t start = ph->p_vaddr & ~(page - 1);
    if (start < out->first_page) out->first_page = start;
    if (ph->p_vaddr + ph->p_memsz > out->end) out->end = ph->p_vaddr + ph->p_memsz;
  }
  if (out->load_count == 0) {
    return fail(error, EL_INVALID_ARGUMENT, "host executable has no loadable segment");
  }
  if (!out->dynamic) {
    return fail(error, EL_INVALID_ARGUMENT, "host executable has no dynamic section");
  }
  if (out->end - out->first_page > EL_MAX_IMAGE_SIZE) {
    return fail(error, EL_INVALID_ARGUMENT,
                "host executable spans %llu bytes of memory; at most %llu",
                (unsigned long long)(out->end - out->first_page),
                (unsigned long long)EL_MAX_IMAGE_SIZE);
  }
  return EL_OK;
}

/* ---- Mapping --------------------------------------------------------------- */

static int map_image(const uint8_t* data, const layout* lay, uint64_t page,
                     el_image* image, char* error) {
  size_t map_size = (size_t)((lay->end - lay->first_page + page - 1) & ~(page - 1));
  void* map = mmap(NULL, map_size, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (map == MAP_FAILED) {
    return fail(error, EL_RESOURCE_EXHAUSTED,
                "mapping %zu bytes for the host executable failed", map_size);
  }
  image->map = map;
  image->map_size = map_size;
  image->bias = (uint8_t*)map - lay->first_page;
  for (int i = 0; i < lay->load_count; ++i) {
    const Elf64_Phdr* ph = lay->loads[i];
    el_segment* s = &image->segments[i];
    s->start = image->bias + ph->p_vaddr;
    s->end = s->start + ph->p_memsz;
    s->readable = (ph->p_flags & PF_R) != 0;
    s->writable = (ph->p_flags & PF_W) != 0;
    s->executable = (ph->p_flags & PF_X) != 0;
    memcpy(s->start, data + ph->p_offset, ph->p_filesz);
  }
  image->segment_count = lay->load_count;
  return EL_OK;
}

/* Final protections per page: the union of the segments on it; none off-segment. */
static int protect_image(el_image* image, uint64_t page, char* error) {
  for (size_t offset = 0; offset < image->map_size; offset += page) {
    uint8_t* p = image->map + offset;
    int prot = PROT_NONE;
    for (int i = 0; i < image->segment_count; ++i) {
      const el_segment* s = &image->segments[i];
      if (s->start >= p + page || s->end <= p) continue;
      if (s->readable) prot |= PROT_READ;
      if (s->writable) prot |= PROT_WRITE;
      if (s->executable) prot |= PROT_EXEC;
    }
    if ((prot & PROT_WRITE) && (prot & PROT_EXEC)) {
      return fail(error, EL_INVALID_ARGUMENT,
                  "host executable page %#zx is both writable and executable", offset);
    }
    if (mprotect(p, page, prot) != 0) {
      return fail(error, EL_RESOURCE_EXHAUSTED, "mprotect of the host executable failed");
    }
  }
  return EL_OK;
}

/* The image address of [vaddr, vaddr + n) if it lies in one segment, else NULL. */
static uint8_t* at(const el_image* image, uint64_t vaddr, uint64_t n) {
  for (int i = 0; i < image->segment_count; ++i) {
    const el_segment* s = &image->segments[i];
    uint64_t start = (uint64_t)(s->start - image->bias);
    uint64_t size = (uint64_t)(s->end - s->start);
    if (vaddr >= start && in_range(vaddr - start, n, size)) return s->start + (vaddr - start);
  }
  return NULL;
}

/* ---- Dynamic section ------------------------------------------------------ */

typedef struct dynamic_info {
  uint64_t symtab, strtab, strsz, syment, hash, gnu_hash;
  uint64_t rela, relasz, relaent, jmprel, pltrelsz, pltrel;
  int has_symtab, has_strtab, has_hash, has_gnu_hash, has_rela, has_jmprel;
} dynamic_info;

static int check_needed(const el_image* image, const dynamic_info* info,
                        const Elf64_Dyn* dyn, int count, char* error) {
  for (int i = 0; i < count && dyn[i].d_tag != DT_NULL; ++i) {
    if (dyn[i].d_tag != DT_NEEDED) continue;
    uint64_t name = dyn[i].d_un.d_val;
    const char* text = name < info->strsz && image->strtab ? image->strtab + name : NULL;
    size_t room = text ? info->strsz - name : 0;
    if (text && strnlen(text, room) < room && strcmp(text, "libm.so.6") == 0) continue;
    return fail(error, EL_UNIMPLEMENTED,
                "host executable needs shared library `%.*s`; executable libraries "
                "link no library but libm", text ? (int)strnlen(text, room > 64 ? 64 : room)
                : 1, text ? text : "?");
  }
  return EL_OK;
}

static int read_dynamic(const el_image* image, const layout* lay,
                        const Elf64_Dyn** out_dyn, int* out_count, dynamic_info* info,
                        char* error) {
  const Elf64_Phdr* ph = lay->dynamic;
  const Elf64_Dyn* dyn = (const Elf64_Dyn*)at(image, ph->p_vaddr, ph->p_memsz);
  if (!dyn || ph->p_vaddr % 8 != 0 || ph->p_memsz < sizeof(Elf64_Dyn)) {
    return fail(error, EL_INVALID_ARGUMENT,
                "host executable's dynamic section (address %#llx, %llu bytes) does not "
                "lie in a loadable segment", (unsigned long long)ph->p_vaddr,
                (unsigned long long)ph->p_memsz);
  }
  int count = (int)(ph->p_memsz / sizeof(Elf64_Dyn));
  memset(info, 0, sizeof(*info));
  for (int i = 0; i < count && dyn[i].d_tag != DT_NULL; ++i) {
    uint64_t v = dyn[i].d_un.d_val;
    switch (dyn[i].d_tag) {
      case DT_SYMTAB: info->symtab = v; info->has_symtab = 1; break;
      case DT_STRTAB: info->strtab = v; info->has_strtab = 1; break;
      case DT_STRSZ: info->strsz = v; break;
      case DT_SYMENT: info->syment = v; break;
      case DT_HASH: info->hash = v; info->has_hash = 1; break;
      case DT_GNU_HASH: info->gnu_hash = v; info->has_gnu_hash = 1; break;
      case DT_RELA: info->rela = v; info->has_rela = 1; break;
      case DT_RELASZ: info->relasz = v; break;
      case DT_RELAENT: info->relaent = v; break;
      case DT_JMPREL: info->jmprel = v; info->has_jmprel = 1; break;
      case DT_PLTRELSZ: info->pltrelsz = v; break;
      case DT_PLTREL: info->pltrel = v; break;
      case DT_REL: case DT_RELSZ: case DT_TEXTREL:
        return fail(error, EL_UNIMPLEMENTED,
                    "host executable has %s; x86-64 executable libraries use RELA "
                    "relocations only", dyn[i].d_tag == DT_TEXTREL ? "DT_TEXTREL" : "REL "
                    "relocations");
      default: break;  /* DT_INIT, DT_INIT_ARRAY, ...: never run */
    }
  }
  *out_dyn = dyn;
  *out_count = count;
  return EL_OK;
}

/* ---- Symbols ------------------------------------------------------------------ */

/* Symbol count from the GNU hash table: one past the highest chained symbol. */
static int gnu_hash_symbol_count(const el_image* image, uint64_t vaddr, uint32_t* out) {
  const uint32_t* h = (const uint32_t*)at(image, vaddr, 16);
  if (!h || vaddr % 8) return 0;
  uint64_t nbuckets = h[0], symoffset = h[1], bloom = h[2];
  uint64_t buckets_at = vaddr + 16 + bloom * 8;
  const uint32_t* buckets = (const uint32_t*)at(image, buckets_at, nbuckets * 4);
  if (!buckets || bloom > (1u << 24) || nbuckets > (1u << 24)) return 0;
  uint64_t last = 0;
  for (uint64_t i = 0; i < nbuckets; ++i) if (buckets[i] > last) last = buckets[i];
  if (last < symoffset) { *out = (uint32_t)symoffset; return 1; }
  uint64_t chains_at = buckets_at + nbuckets * 4;
  for (;;) {
    const uint32_t* chain = (const uint32_t*)at(image, chains_at + (last - symoffset) * 4, 4);
    if (!chain) return 0;
    if (*chain & 1) break;
    if (++last > (1u << 24)) return 0;
  }
  *out = (uint32_t)(last + 1);
  return 1;
}

static int read_symbols(el_image* image, const dynamic_info* info, char* error) {
  if (!info->has_symtab || !info->has_strtab ||
      (info->syment && info->syment != sizeof(Elf64_Sym))) {
    return fail(error, EL_INVALID_ARGUMENT,
                "host executable has no dynamic symbol or string table");
  }
  image->strtab = (const char*)at(image, info->strtab, info->strsz);
  if (!image->strtab || info->strsz == 0) {
    return fail(error, EL_INVALID_ARGUMENT,
                "host executable's string table (address %#llx, %llu bytes) does not "
                "lie in a loadable segment", (unsigned long long)info->strtab,
                (unsigned long long)info->strsz);
  }
  image->strtab_size = info->strsz;
  uint32_t count = 0;
  if (info->has_hash) {
    const uint32_t* h = (const uint32_t*)at(image, info->hash, 8);
    if (h) count = h[1];
    if (!h) return fail(error, EL_INVALID_ARGUMENT, "host executable's hash table is "
                        "out of bounds");
  } else if (!info->has_gnu_hash || !gnu_hash_symbol_count(image, info->gnu_hash, &count)) {
    return fail(error, EL_INVALID_ARGUMENT,
                "host executable has no readable symbol hash table (DT_HASH or "
                "DT_GNU_HASH)");
  }
  image->symtab = at(image, info->symtab, (uint64_t)count * sizeof(Elf64_Sym));
  if (!image->symtab || info->symtab % 8) {
    return fail(error, EL_INVALID_ARGUMENT,
                "host executable's symbol table (%u symbols at %#llx) does not lie in a "
                "loadable segment", count, (unsigned long long)info->symtab);
  }
  image->symbol_count = count;
  return EL_OK;
}

static const Elf64_Sym* symbol(const el_image* image, uint32_t index) {
  return index < image->symbol_count ? (const Elf64_Sym*)image->symtab + index : NULL;
}

/* The symbol's name if it is a string inside the string table, else NULL. */
static const char* symbol_name(const el_image* image, const Elf64_Sym* sym) {
  if (sym->st_name >= image->strtab_size) return NULL;
  const char* name = image->strtab + sym->st_name;
  size_t room = image->strtab_size - sym->st_name;
  return strnlen(name, room) < room ? name : NULL;
}

/* An undefined symbol's address: a libm function, or 0 for an undefined weak. */
static int resolve_undefined(const Elf64_Sym* sym, const char* name, uint64_t* out,
                             char* error) {
  static void* libm = NULL;
  if (!libm) libm = dlopen("libm.so.6", RTLD_NOW | RTLD_LOCAL);
  void* address = libm && name && *name ? dlsym(libm, name) : NULL;
  Dl_info where;
  if (address && dladdr(address, &where) && where.dli_fname &&
      strstr(where.dli_fname, "libm.so")) {
    *out = (uint64_t)(uintptr_t)address;
    return EL_OK;
  }
  if (ELF64_ST_BIND(sym->st_info) == STB_WEAK) {
    *out = 0;
    return EL_OK;
  }
  return fail(error, EL_NOT_FOUND,
              "host executable refers to undefined symbol `%.64s`, which is not a libm "
              "function", name ? name : "?");
}

static int symbol_value(const el_image* image, uint32_t index, uint64_t* out,
                        char* error) {
  if (index == 0) { *out = 0; return EL_OK; }
  const Elf64_Sym* sym = symbol(image, index);
  if (!sym) {
    return fail(error, EL_INVALID_ARGUMENT,
                "host executable relocation names symbol %u of %u", index,
                image->symbol_count);
  }
  const char* name = symbol_name(image, sym);
  if (sym->st_shndx == SHN_UNDEF) return resolve_undefined(sym, name, out, error);
  if (sym->st_shndx == SHN_ABS) { *out = sym->st_value; return EL_OK; }
  if (!at(image, sym->st_value, 0)) {
    return fail(error, EL_INVALID_ARGUMENT,
                "host executable symbol `%.64s` at %#llx is outside its segments",
                name ? name : "?", (unsigned long long)sym->st_value);
  }
  *out = (uint64_t)(uintptr_t)(image->bias + sym->st_value);
  return EL_OK;
}

/* ---- Relocation --------------------------------------------------------------- */

static int apply_relocation(const el_image* image, const Elf64_Rela* r, char* error) {
  uint32_t type = ELF64_R_TYPE(r->r_info);
  uint64_t s = 0;
  int width = type == R_X86_64_PC32 || type == R_X86_64_32 || type == R_X86_64_32S ? 4 : 8;
  if (type == R_X86_64_NONE) return EL_OK;
  uint8_t* p = at(image, r->r_offset, width);
  if (!p) {
    return fail(error, EL_INVALID_ARGUMENT,
                "host executable relocation at %#llx is outside its segments",
                (unsigned long long)r->r_offset);
  }
  int code = symbol_value(image, ELF64_R_SYM(r->r_info), &s, error);
  if (code != EL_OK) return code;
  uint64_t a = (uint64_t)r->r_addend;
  uint64_t place = (uint64_t)(uintptr_t)p;
  uint64_t value;
  switch (type) {
    case R_X86_64_64: value = s + a; break;
    case R_X86_64_PC64: value = s + a - place; break;
    case R_X86_64_GLOB_DAT: case R_X86_64_JUMP_SLOT: value = s; break;
    case R_X86_64_RELATIVE: value = (uint64_t)(uintptr_t)image->bias + a; break;
    case R_X86_64_PC32: value = s + a - place; break;
    case R_X86_64_32: case R_X86_64_32S: value = s + a; break;
    default:
      return fail(error, EL_UNIMPLEMENTED,
                  "host executable uses relocation type %u, which IREE's executable "
                  "libraries do not", type);
  }
  if (width == 8) { memcpy(p, &value, 8); return EL_OK; }
  int fits = type == R_X86_64_32 ? value <= UINT32_MAX
                                 : (int64_t)value == (int64_t)(int32_t)value;
  if (!fits) {
    return fail(error, EL_INVALID_ARGUMENT,
                "host executable relocation of type %u at %#llx overflows 32 bits", type,
                (unsigned long long)r->r_offset);
  }
  uint32_t narrow = (uint32_t)value;
  memcpy(p, &narrow, 4);
  return EL_OK;
}

static int apply_table(const el_image* image, uint64_t vaddr, uint64_t size,
                       const char* what, char* error) {
  const Elf64_Rela* table = (const Elf64_Rela*)at(image, vaddr, size);
  if (!table || size % sizeof(Elf64_Rela) || vaddr % 8) {
    return fail(error, EL_INVALID_ARGUMENT,
                "host executable's %s relocations (%llu bytes at %#llx) do not lie in a "
                "loadable segment", what, (unsigned long long)size,
                (unsigned long long)vaddr);
  }
  for (uint64_t i = 0; i < size / sizeof(Elf64_Rela); ++i) {
    int code = apply_relocation(image, &table[i], error);
    if (code != EL_OK) return code;
  }
  return EL_OK;
}

static int relocate(const el_image* image, const dynamic_info* info, char* error) {
  if (info->relaent && info->relaent != sizeof(Elf64_Rela)) {
    return fail(error, EL_INVALID_ARGUMENT,
                "host executable's relocation entries are %llu bytes; expected %zu",
                (unsigned long long)info->relaent, sizeof(Elf64_Rela));
  }
  if (info->has_jmprel && info->pltrel != DT_RELA) {
    return fail(error, EL_UNIMPLEMENTED,
                "host executable's PLT relocations are not RELA (DT_PLTREL %llu)",
                (unsigned long long)info->pltrel);
  }
  int code = EL_OK;
  if (info->has_rela) code = apply_table(image, info->rela, info->relasz, "dynamic", error);
  if (code == EL_OK && info->has_jmprel) {
    code = apply_table(image, info->jmprel, info->pltrelsz, "PLT", error);
  }
  return code;
}

/* ---- API ---------------------------------------------------------------------- */

int el_load(const uint8_t* data, size_t size, el_image* image, char* error) {
  memset(image, 0, sizeof(*image));
  error[0] = '\0';
  uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
  const Elf64_Ehdr* eh = NULL;
  layout lay;
  const Elf64_Dyn* dyn = NULL;
  int dyn_count = 0;
  dynamic_info info;
  int code = check_header(data, size, &eh, error);
  if (code == EL_OK) code = read_layout(data, size, eh, page, &lay, error);
  if (code == EL_OK) code = map_image(data, &lay, page, image, error);
  if (code == EL_OK) code = read_dynamic(image, &lay, &dyn, &dyn_count, &info, error);
  if (code == EL_OK) code = read_symbols(image, &info, error);
  if (code == EL_OK) code = check_needed(image, &info, dyn, dyn_count, error);
  if (code == EL_OK) code = relocate(image, &info, error);
  if (code == EL_OK) code = protect_image(image, page, error);
  if (code != EL_OK) el_unload(image);
  return code;
}

void el_unload(el_image* image) {
  if (image->map) munmap(image->map, image->map_size);
  memset(image, 0, sizeof(*image));
}

void* el_lookup_function(const el_image* image, const char* name) {
  for (uint32_t i = 1; i < image->symbol_count; ++i) {
    const Elf64_Sym* sym = symbol(image, i);
    const char* sym_name = symbol_name(image, sym);
    if (!sym_name || strcmp(sym_name, name) != 0 || sym->st_shndx == SHN_UNDEF ||
        ELF64_ST_TYPE(sym->st_info) != STT_FUNC) {
      continue;
    }
    uint8_t* address = at(image, sym->st_value, 1);
    return address && el_executable(image, address) ? address : NULL;
  }
  return NULL;
}

int el_readable(const el_image* image, const void* p, size_t n) {
  for (int i = 0; i < image->segment_count; ++i) {
    const el_segment* s = &image->segments[i];
    const uint8_t* q = p;
    if (s->readable && q >= s->start && in_range((uint64_t)(q - s->start), n,
                                                 (uint64_t)(s->end - s->start))) {
      return 1;
    }
  }
  return 0;
}

int el_executable(const el_image* image, const void* p) {
  for (int i = 0; i < image->segment_count; ++i) {
    const el_segment* s = &image->segments[i];
    if (s->executable && (const uint8_t*)p >= s->start && (const uint8_t*)p < s->end) {
      return 1;
    }
  }
  return 0;
}

int el_string(const el_image* image, const char* p) {
  for (int i = 0; i < image->segment_count; ++i) {
    const el_segment* s = &image->segments[i];
    const uint8_t* q = (const uint8_t*)p;
    if (s->readable && q >= s->start && q < s->end) {
      size_t room = (size_t)(s->end - q);
      return strnlen(p, room) < room;
    }
  }
  return 0;
}
