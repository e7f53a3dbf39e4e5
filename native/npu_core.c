/* The simulated NPU core. See npu_core.h and docs/npu-architecture.md.
 *
 * Execution is one pass in program order: validate the instruction (every SRAM and
 * DRAM box against its bounds, once per instruction), compute it, then advance the
 * cycle model exactly as executable_format/cost.py does. A pre-pass checks every record
 * up to END against the encoding and the static rules of docs/npu-architecture.md (the
 * verifier's), so a malformed program runs nothing. Beyond the documented rules the core
 * rejects a MAC output overlapping its inputs and bounds each instruction's work by the
 * SRAM size (ELEMENTS_PER_SRAM_BYTE, MACS_PER_SRAM_BYTE), so it never runs for long.
 *
 * Compute: f16/bf16 are converted to f32 and rounded to nearest even on store; i8
 * MACs accumulate in i32 (wrapping, built with -fwrapv). MAC instructions pack their
 * operands into f32/i32 scratch and run one register-tiled GEMM kernel; conv2d is an
 * implicit im2col over chunks of output rows (dwconv2d: the conv2d with f = groups = c). Large MAC instructions are split over
 * worker threads (NPU_SIM_THREADS, default the online CPUs) by output columns, rows or
 * chunks, which leaves every output element's summation order, and so its bits, as on
 * one thread. Vector instructions stream rows through f32 (or
 * i32) chunks so every inner loop is a tight, vectorizable loop.
 */
#define _GNU_SOURCE /* sysconf(_SC_NPROCESSORS_ONLN), sigaction, clock_gettime */
#include "npu_core.h"
#include "npu_isa.h"

#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef unsigned __int128 u128;

/* ---- instruction set: native/npu_isa.h (opcodes, dtypes, engines, flags, the opcode
 * table and the per-instruction work bounds per SRAM byte), generated from
 * executable_format/isa.py ---------------------------------------------------------- */

_Static_assert(INSTRUCTION_BYTES == NPU_INSTRUCTION_BYTES, "npu_core.h agrees with isa.py");
_Static_assert(CONST_POOL == NPU_CONST_POOL_BINDING, "npu_core.h agrees with isa.py");
_Static_assert(ENGINE_CONTROL == NPU_ENGINE_COUNT, "the engines with a timeline precede control");

/* One instruction record; a[] holds the operand fields, named by the opcode's layout
 * (a[MATMUL_LDA], a[DMA_N0]: npu_isa.h). */
typedef struct instr_t {
  uint8_t opcode;
  uint8_t dtype;
  uint16_t flags;
  uint32_t a[OPERAND_COUNT];
} instr_t;

static instr_t decode(const uint8_t* p) {
  instr_t in;
  in.opcode = p[0];
  in.dtype = p[1];
  in.flags = (uint16_t)(p[2] | (p[3] << 8));
  for (int i = 0; i < OPERAND_COUNT; i++) {
    const uint8_t* q = p + 4 + 4 * i;
    in.a[i] = (uint32_t)q[0] | ((uint32_t)q[1] << 8) | ((uint32_t)q[2] << 16) |
              ((uint32_t)q[3] << 24);
  }
  return in;
}

/* Counts and strides read as arrays (a + DMA_N0: n0..n3) are consecutive fields. */
_Static_assert(DMA_N3 == DMA_N0 + 3 && DMA_DRAM_S3 == DMA_DRAM_S0 + 3 &&
               DMA_SRAM_S3 == DMA_SRAM_S0 + 3 && FILL_N3 == FILL_N0 + 3 &&
               FILL_S3 == FILL_S0 + 3, "4-D boxes");
_Static_assert(BINARY_N2 == BINARY_N0 + 2 && BINARY_DST_S2 == BINARY_DST_S0 + 2 &&
               BINARY_LHS_S2 == BINARY_LHS_S0 + 2 && BINARY_RHS_S2 == BINARY_RHS_S0 + 2 &&
               UNARY_N2 == UNARY_N0 + 2 && UNARY_DST_S2 == UNARY_DST_S0 + 2 &&
               UNARY_SRC_S2 == UNARY_SRC_S0 + 2 && VCVT_N2 == VCVT_N0 + 2 &&
               VCVT_DST_S2 == VCVT_DST_S0 + 2 && VCVT_SRC_S2 == VCVT_SRC_S0 + 2, "3-D boxes");

static uint32_t lo16(uint32_t v) { return v & 0xFFFFu; }
static uint32_t hi16(uint32_t v) { return v >> 16; }

/* The field n0 of a binary, unary or vcvt vector op: its 3-D box's counts n0, n1, n2. */
static int vector_n0_field(int layout) {
  _Static_assert(UNARY_N0 == VCVT_N0, "unary and vcvt boxes share their fields");
  return layout == LAYOUT_BINARY ? BINARY_N0 : UNARY_N0;
}

/* A conv2d or dwconv2d's operands and shape. A dwconv2d is the conv2d with
 * f = groups = c: it computes the same sums in the same order, so the same bits. */
typedef struct conv_args_t {
  uint32_t in, w, out, bias;
  uint32_t c, hi, wi, f, ho, wo, kh, kw, sh, sw, dh, dw, groups;
} conv_args_t;

static conv_args_t conv_args(const instr_t* in) {
  const uint32_t* a = in->a;
  if (in->opcode == OP_DWCONV2D) {
    return (conv_args_t){
        .in = a[DWCONV2D_IN], .w = a[DWCONV2D_W], .out = a[DWCONV2D_OUT],
        .bias = a[DWCONV2D_BIAS], .c = a[DWCONV2D_C], .hi = a[DWCONV2D_HI],
        .wi = a[DWCONV2D_WI], .f = a[DWCONV2D_C], .ho = a[DWCONV2D_HO], .wo = a[DWCONV2D_WO],
        .kh = lo16(a[DWCONV2D_KH_KW]), .kw = hi16(a[DWCONV2D_KH_KW]),
        .sh = lo16(a[DWCONV2D_SH_SW]), .sw = hi16(a[DWCONV2D_SH_SW]),
        .dh = lo16(a[DWCONV2D_DH_DW]), .dw = hi16(a[DWCONV2D_DH_DW]), .groups = a[DWCONV2D_C]};
  }
  return (conv_args_t){
      .in = a[CONV2D_IN], .w = a[CONV2D_W], .out = a[CONV2D_OUT], .bias = a[CONV2D_BIAS],
      .c = a[CONV2D_C], .hi = a[CONV2D_HI], .wi = a[CONV2D_WI], .f = a[CONV2D_F],
      .ho = a[CONV2D_HO], .wo = a[CONV2D_WO],
      .kh = lo16(a[CONV2D_KH_KW]), .kw = hi16(a[CONV2D_KH_KW]),
      .sh = lo16(a[CONV2D_SH_SW]), .sw = hi16(a[CONV2D_SH_SW]),
      .dh = lo16(a[CONV2D_DH_DW]), .dw = hi16(a[CONV2D_DH_DW]), .groups = a[CONV2D_GROUPS]};
}

/* ---- deadline, cancellation and SIGINT -----------------------------------
 * A run stops early when its deadline passes, when npu_core_cancel is called or, if
 * asked, on SIGINT. Every loop that can run long reports the work it did to
 * stopping(work): a relaxed load of the run's stop flag and, once this thread has done
 * STOP_CHECK_WORK units since it last looked (a few hundred microseconds of MACs, tens
 * of microseconds to milliseconds of elements), a clock read and a look at the cancel
 * and SIGINT counts. The first thread that sees a reason stores it in the flag; every
 * thread then leaves its loops and the run fails with that status. Work units are those
 * of the verifier's program bound: a MAC is 1, an element ELEMENT_WORK
 * (MACS_PER_SRAM_BYTE / ELEMENTS_PER_SRAM_BYTE: one instruction at either
 * per-instruction cap is the same work). */
#define STOP_CHECK_WORK ((uint64_t)1 << 20)
#define ELEMENT_WORK ((uint64_t)(MACS_PER_SRAM_BYTE / ELEMENTS_PER_SRAM_BYTE))
/* Element loops over one long row work in pieces of this many elements. */
#define RUN_PIECE ((size_t)1 << 15)

typedef struct control_t {
  uint64_t start_ns;
  uint64_t timeout_ns;                    /* 0: no deadline */
  uint64_t deadline_ns;                   /* UINT64_MAX: none */
  const atomic_uint_fast64_t* cancels;   /* the core's cancel count ... */
  uint64_t cancels_at_start;             /* ... when the run started */
  bool watch_sigint;
  uint64_t sigints_at_start;
  atomic_int stop;                        /* NPU_STATUS_OK, or why the run stops */
} control_t;

/* The run this thread works for (NULL: none, nothing stops) and its work since it last
 * read the clock. Initial-exec: a few bytes of the static TLS surplus glibc keeps for
 * dlopen'ed libraries, without a __tls_get_addr call per access. */
static __thread control_t* t_control __attribute__((tls_model("initial-exec")));
static __thread uint64_t t_work __attribute__((tls_model("initial-exec")));

static atomic_uint_fast64_t g_sigints;   /* SIGINTs seen by on_sigint */

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The full look: cancel count, SIGINT count, clock. */
static bool poll_stop(control_t* c) {
  int why = NPU_STATUS_OK;
  if (atomic_load_explicit(c->cancels, memory_order_relaxed) != c->cancels_at_start ||
      (c->watch_sigint &&
       atomic_load_explicit(&g_sigints, memory_order_relaxed) != c->sigints_at_start)) {
    why = NPU_STATUS_CANCELLED;
  } else if (c->deadline_ns != UINT64_MAX && now_ns() >= c->deadline_ns) {
    why = NPU_STATUS_DEADLINE_EXCEEDED;
  }
  if (why == NPU_STATUS_OK) return false;
  int expected = NPU_STATUS_OK;
  atomic_compare_exchange_strong(&c->stop, &expected, why);
  return true;
}

/* True when the run this thread works for is stopping; `work` is what the thread did
 * since its last call. */
static inline bool stopping(uint64_t work) {
  control_t* c = t_control;
  if (!c) return false;
  if (atomic_load_explicit(&c->stop, memory_order_relaxed) != NPU_STATUS_OK) return true;
  t_work += work;
  if (t_work < STOP_CHECK_WORK) return false;
  t_work = 0;
  return poll_stop(c);
}

static inline bool stopping_elements(size_t elements) {
  return stopping(ELEMENT_WORK * elements);
}

/* SIGINT: the first run that watches it installs the core's handler, which stays: it
 * counts the signal and calls the handler it replaced (Python's, which raises
 * KeyboardInterrupt in the main thread), so outside runs it changes nothing. Each
 * watching run checks that it is still installed (one sigaction query: whoever sets
 * another handler, e.g. Python's signal.signal, replaces it, and the next watching run
 * installs it again over the new one). g_sigint_previous is written only while the
 * handler is not installed. */
static pthread_mutex_t g_sigint_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sigaction g_sigint_previous;

static void on_sigint(int sig, siginfo_t* info, void* context) {
  atomic_fetch_add_explicit(&g_sigints, 1, memory_order_relaxed);
  const struct sigaction* p = &g_sigint_previous;
  if (p->sa_flags & SA_SIGINFO) {
    if (p->sa_sigaction) p->sa_sigaction(sig, info, context);
  } else if (p->sa_handler != SIG_DFL && p->sa_handler != SIG_IGN) {
    p->sa_handler(sig);
  }
}

/* Starts watching SIGINT for a run: the SIGINT count now, and whether the handler is
 * installed (not when SIGINT is ignored or has its default action). */
static bool sigint_watch(uint64_t* sigints) {
  bool watched = false;
  struct sigaction current;
  pthread_mutex_lock(&g_sigint_lock);
  *sigints = atomic_load(&g_sigints);
  if (sigaction(SIGINT, NULL, &current) == 0) {
    if ((current.sa_flags & SA_SIGINFO) && current.sa_sigaction == on_sigint) {
      watched = true;
    } else if ((current.sa_flags & SA_SIGINFO) ||
               (current.sa_handler != SIG_DFL && current.sa_handler != SIG_IGN)) {
      struct sigaction ours = current;         /* its mask and flags (SA_ONSTACK...) */
      ours.sa_flags |= SA_SIGINFO;
      ours.sa_sigaction = on_sigint;
      g_sigint_previous = current;
      watched = sigaction(SIGINT, &ours, NULL) == 0;
    }
  }
  pthread_mutex_unlock(&g_sigint_lock);
  return watched;
}

/* ---- float conversions (round to nearest even) -------------------------- */

static inline uint32_t f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float bits_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

static inline float f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1Fu;
  uint32_t mant = h & 0x3FFu;
  float magnitude;
  if (exp == 0) {
    magnitude = (float)mant * 0x1p-24f;                       /* zero, subnormal */
  } else if (exp == 31) {
    magnitude = bits_f32(0x7F800000u | (mant << 13));        /* inf, nan */
  } else {
    magnitude = bits_f32(((exp + 112u) << 23) | (mant << 13));
  }
  return bits_f32(f32_bits(magnitude) | sign);
}

static inline uint16_t f32_to_f16(float value) {
  uint32_t f = f32_bits(value);
  uint32_t sign = (f >> 16) & 0x8000u;
  f &= 0x7FFFFFFFu;
  uint32_t h;
  if (f > 0x7F800000u) {
    h = 0x7E00u | ((f >> 13) & 0x3FFu);                     /* nan stays nan */
  } else if (f >= 0x477FF000u) {
    h = 0x7C00u;                                             /* rounds to inf */
  } else if (f < 0x38800000u) {
    /* subnormal or zero: let the FPU round the magnitude onto the 2^-24 grid */
    h = f32_bits(bits_f32(f) + 0.5f) - f32_bits(0.5f);
  } else {
    uint32_t odd = (f >> 13) & 1u;
    h = (f + 0xC8000FFFu + odd) >> 13;                       /* rebias: -112 << 23 */
  }
  return (uint16_t)(h | sign);
}

static inline float bf16_to_f32(uint16_t b) { return bits_f32((uint32_t)b << 16); }

static inline uint16_t f32_to_bf16(float value) {
  uint32_t f = f32_bits(value);
  if ((f & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((f >> 16) | 0x40u);
  return (uint16_t)((f + 0x7FFFu + ((f >> 16) & 1u)) >> 16);
}

/* NaN-propagating max/min (numpy maximum/minimum). */
#define NPU_MAX(x, y) (((x) >= (y) || (x) != (x)) ? (x) : (y))
#define NPU_MIN(x, y) (((x) <= (y) || (x) != (x)) ? (x) : (y))

/* ---- strided row loads/stores between SRAM/DRAM and f32/i32 chunks ------ */

static void load_f32(int dtype, const uint8_t* base, size_t stride, size_t n,
                     float* restrict out) {
  if (dtype == DT_F32) {
    if (stride == 1) {
      memcpy(out, base, n * 4);
    } else {
      const float* src = (const float*)base;
      for (size_t i = 0; i < n; i++) out[i] = src[i * stride];
    }
  } else {
    const uint16_t* src = (const uint16_t*)base;
    if (dtype == DT_F16) {
      for (size_t i = 0; i < n; i++) out[i] = f16_to_f32(src[i * stride]);
    } else {
      for (size_t i = 0; i < n; i++) out[i] = bf16_to_f32(src[i * stride]);
    }
  }
}

static void store_f32(int dtype, uint8_t* base, size_t stride, size_t n,
                      const float* restrict in) {
  if (dtype == DT_F32) {
    if (stride == 1) {
      memmove(base, in, n * 4);
    } else {
      float* dst = (float*)base;
      for (size_t i = 0; i < n; i++) dst[i * stride] = in[i];
    }
  } else {
    uint16_t* dst = (uint16_t*)base;
    if (dtype == DT_F16) {
      for (size_t i = 0; i < n; i++) dst[i * stride] = f32_to_f16(in[i]);
    } else {
      for (size_t i = 0; i < n; i++) dst[i * stride] = f32_to_bf16(in[i]);
    }
  }
}

/* i8 or i32 elements to i32. */
/* Byte integers: the MAC array's integer operand dtypes (i8, u8). */
static bool is_byte_int(int dtype) { return dtype == DT_I8 || dtype == DT_U8; }

/* The dtype of a MAC instruction's B operand (matmul) or weights (conv2d, dwconv2d):
 * the instruction's, or with MIXED_SIGN the other byte integer (isa.mac_b_dtype). */
static int mac_b_dtype(const instr_t* in) {
  if (!(in->flags & FLAG_MIXED_SIGN)) return in->dtype;
  return in->dtype == DT_I8 ? DT_U8 : DT_I8;
}

static void load_i32(int dtype, const uint8_t* base, size_t stride, size_t n,
                     int32_t* restrict out) {
  if (dtype == DT_I32) {
    const int32_t* src = (const int32_t*)base;
    for (size_t i = 0; i < n; i++) out[i] = src[i * stride];
  } else if (dtype == DT_U8) {
    for (size_t i = 0; i < n; i++) out[i] = base[i * stride];
  } else {
    const int8_t* src = (const int8_t*)base;
    for (size_t i = 0; i < n; i++) out[i] = src[i * stride];
  }
}

static void store_i32(uint8_t* base, size_t stride, size_t n, const int32_t* restrict in) {
  int32_t* dst = (int32_t*)base;
  for (size_t i = 0; i < n; i++) dst[i * stride] = in[i];
}

/* Element copy of n elements with element strides (bytes may be unaligned: DRAM). */
static void copy_run(uint8_t* dst, size_t dst_stride, const uint8_t* src, size_t src_stride,
                     size_t n, unsigned elem) {
  if (dst_stride == 1 && src_stride == 1) {
    memmove(dst, src, n * elem);
    return;
  }
  size_t ds = dst_stride * elem, ss = src_stride * elem;
  switch (elem) {
    case 1:
      for (size_t i = 0; i < n; i++) dst[i * ds] = src[i * ss];
      break;
    case 2:
      for (size_t i = 0; i < n; i++) memcpy(dst + i * ds, src + i * ss, 2);
      break;
    default:
      for (size_t i = 0; i < n; i++) memcpy(dst + i * ds, src + i * ss, 4);
      break;
  }
}

/* copy_run over a long row in pieces of RUN_PIECE elements, polling stopping() after
 * each; false when the run stops. A contiguous run on both sides is one memmove (a
 * piecewise copy would change the result of overlapping ranges; it is at most the SRAM
 * size). */
static bool copy_run_polled(uint8_t* dst, size_t dst_stride, const uint8_t* src,
                            size_t src_stride, size_t n, unsigned elem) {
  if (dst_stride == 1 && src_stride == 1) {
    copy_run(dst, 1, src, 1, n, elem);
    return !stopping_elements(n);
  }
  for (size_t i = 0; i < n; i += RUN_PIECE) {
    size_t len = n - i < RUN_PIECE ? n - i : RUN_PIECE;
    copy_run(dst + i * dst_stride * elem, dst_stride, src + i * src_stride * elem, src_stride,
             len, elem);
    if (stopping_elements(len)) return false;
  }
  return true;
}

/* ---- GEMM kernel: C[m][n] += A[m][k] * B[k][n] (row-major, leading dims) --
 * C is computed in tiles of GEMM_MR (or, for the last m % GEMM_MR rows, 1) rows by
 * GEMM_NR columns, held in registers across blocks of GEMM_KB of k. k advances four
 * steps at a time, each element adding x0*b0 + x1*b1 + x2*b2 + x3*b3, then one step at
 * a time for the last k % 4. An element's value depends only on its row of A and column
 * of B, so every tiling and every split of C over threads gives the same bits.
 *
 * The vectors are as wide as the target's own (GCC's __BIGGEST_ALIGNMENT__: 16 bytes
 * for SSE2 or NEON, 32 for AVX2, 64 for AVX-512) and a tile needs about GEMM_MR + 4 +
 * 4 of them, within the 16 registers of SSE2 and AVX2: a vector wider than the target's
 * is split by GCC through the stack (the 64-byte vectors this kernel had ran at 2.3
 * GFLOP/s in an AVX2 build, see docs/performance.md). Each block of B (GEMM_KB rows of
 * one panel of GEMM_NR columns) that more than one tile reads is first copied into a
 * dense buffer, so the tiles read it from L1 whatever B's row stride. Tiles cut by the
 * right edge of C run on a copy; B is read GEMM_NR columns at a time, so a B operand
 * needs GEMM_NR elements of readable slack past its end (their lanes are computed and
 * dropped). */
#if defined(__BIGGEST_ALIGNMENT__) && __BIGGEST_ALIGNMENT__ >= 64
#define GEMM_LANES 16
#elif defined(__BIGGEST_ALIGNMENT__) && __BIGGEST_ALIGNMENT__ >= 32
#define GEMM_LANES 8
#else
#define GEMM_LANES 4
#endif
#define GEMM_MR 6
#define GEMM_NR GEMM_LANES
#define GEMM_KB 256
/* A GEMM polls stopping() once per panel of columns when m * k is at least this (a
 * smaller one is at most a few milliseconds of work in all, polled by its caller). */
#define GEMM_POLL_MK 4096
_Static_assert(GEMM_KB % 4 == 0, "k blocks must not split a four-step group");

typedef float gemm_f32_vec __attribute__((vector_size(GEMM_LANES * 4), aligned(4)));
typedef int32_t gemm_i32_vec __attribute__((vector_size(GEMM_LANES * 4), aligned(4)));

#define DEFINE_GEMM_TILE(NAME, T, V, ROWS)                                             \
  static void NAME(size_t k, const T* const* a, const T* b, size_t ldb, T* c,          \
                   size_t ldc) {                                                       \
    V acc[ROWS];                                                                       \
    for (int r = 0; r < ROWS; r++) acc[r] = *(const V*)(c + r * ldc);                  \
    size_t kk = 0;                                                                     \
    for (; kk + 4 <= k; kk += 4) {                                                     \
      V b0 = *(const V*)(b + kk * ldb), b1 = *(const V*)(b + (kk + 1) * ldb);          \
      V b2 = *(const V*)(b + (kk + 2) * ldb), b3 = *(const V*)(b + (kk + 3) * ldb);    \
      for (int r = 0; r < ROWS; r++) {                                                 \
        T x0 = a[r][kk], x1 = a[r][kk + 1], x2 = a[r][kk + 2], x3 = a[r][kk + 3];      \
        acc[r] += x0 * b0 + x1 * b1 + x2 * b2 + x3 * b3;                               \
      }                                                                                \
    }                                                                                  \
    for (; kk < k; kk++) {                                                             \
      V b0 = *(const V*)(b + kk * ldb);                                                \
      for (int r = 0; r < ROWS; r++) acc[r] += a[r][kk] * b0;                          \
    }                                                                                  \
    for (int r = 0; r < ROWS; r++) *(V*)(c + r * ldc) = acc[r];                        \
  }

/* NAME(m, n, k, a, lda, b, ldb, c, ldc): panels of GEMM_NR columns, tiles of rows. */
#define DEFINE_GEMM(NAME, T, TILE_MR, TILE_1)                                          \
  static void NAME##_run_tile(size_t rows, size_t nr, size_t k, const T* const* a,     \
                          const T* b, size_t ldb, T* c, size_t ldc) {                  \
    if (nr == GEMM_NR) {                                                               \
      (rows == GEMM_MR ? TILE_MR : TILE_1)(k, a, b, ldb, c, ldc);                      \
      return;                                                                          \
    }                                                                                  \
    T edge[GEMM_MR * GEMM_NR] = {0};                                                   \
    for (size_t r = 0; r < rows; r++) memcpy(edge + r * GEMM_NR, c + r * ldc, nr * sizeof(T)); \
    (rows == GEMM_MR ? TILE_MR : TILE_1)(k, a, b, ldb, edge, GEMM_NR);                 \
    for (size_t r = 0; r < rows; r++) memcpy(c + r * ldc, edge + r * GEMM_NR, nr * sizeof(T)); \
  }                                                                                    \
                                                                                       \
  static void NAME(size_t m, size_t n, size_t k, const T* a, size_t lda, const T* b,   \
                   size_t ldb, T* c, size_t ldc) {                                     \
    _Alignas(64) T panel[GEMM_KB * GEMM_NR];                                           \
    bool poll = m * k >= GEMM_POLL_MK;                                                 \
    for (size_t j = 0; j < n; j += GEMM_NR) {                                          \
      if (poll && stopping((uint64_t)m * GEMM_NR * k)) return;                         \
      size_t nr = n - j < GEMM_NR ? n - j : GEMM_NR;                                   \
      for (size_t k0 = 0; k0 < k; k0 += GEMM_KB) {                                     \
        size_t kb = k - k0 < GEMM_KB ? k - k0 : GEMM_KB;                               \
        const T* bk = b + k0 * ldb + j;                                                \
        size_t ldbk = ldb;                                                             \
        if (m > GEMM_MR) {                                                             \
          for (size_t kk = 0; kk < kb; kk++) {                                         \
            memcpy(panel + kk * GEMM_NR, bk + kk * ldb, nr * sizeof(T));               \
            memset(panel + kk * GEMM_NR + nr, 0, (GEMM_NR - nr) * sizeof(T));          \
          }                                                                            \
          bk = panel, ldbk = GEMM_NR;                                                  \
        }                                                                              \
        size_t i = 0;                                                                  \
        for (; i + GEMM_MR <= m; i += GEMM_MR) {                                       \
          const T* rows[GEMM_MR];                                                      \
          for (size_t r = 0; r < GEMM_MR; r++) rows[r] = a + (i + r) * lda + k0;       \
          NAME##_run_tile(GEMM_MR, nr, kb, rows, bk, ldbk, c + i * ldc + j, ldc);      \
        }                                                                              \
        for (; i < m; i++) {                                                           \
          const T* row = a + i * lda + k0;                                             \
          NAME##_run_tile(1, nr, kb, &row, bk, ldbk, c + i * ldc + j, ldc);            \
        }                                                                              \
      }                                                                                \
    }                                                                                  \
  }

DEFINE_GEMM_TILE(gemm_f32_tile4, float, gemm_f32_vec, GEMM_MR)
DEFINE_GEMM_TILE(gemm_f32_tile1, float, gemm_f32_vec, 1)
DEFINE_GEMM_TILE(gemm_i32_tile4, int32_t, gemm_i32_vec, GEMM_MR)
DEFINE_GEMM_TILE(gemm_i32_tile1, int32_t, gemm_i32_vec, 1)
DEFINE_GEMM(gemm_f32, float, gemm_f32_tile4, gemm_f32_tile1)
DEFINE_GEMM(gemm_i32, int32_t, gemm_i32_tile4, gemm_i32_tile1)

/* ---- worker threads -------------------------------------------------------
 * An execute with a large MAC instruction starts a pool of threads (NPU_SIM_THREADS,
 * default the online CPUs, less the caller) that sleep between instructions. A large
 * instruction is split into units, each computing a disjoint set of output elements;
 * the caller and the pool's threads claim units in order from a shared counter until
 * none are left, so a worker whose CPU is busy elsewhere just claims fewer. Threads that
 * cannot be created leave the work to the others. Which worker computes a unit does not
 * change its bits. */
#define MAX_THREADS 64
/* An instruction gets one worker per this many MACs (a worker's wake-up costs
 * microseconds). */
#define MACS_PER_WORKER ((uint64_t)1 << 19)

typedef void (*unit_fn)(const void* job, size_t unit, size_t worker);

typedef struct work_t {
  unit_fn fn;
  const void* job;
  size_t units;
  size_t workers;            /* workers 0 (the caller) .. workers - 1 take part */
  atomic_size_t next;        /* the next unit to claim */
  control_t* control;        /* the run's (the caller's t_control) */
} work_t;

typedef struct pool_t pool_t;

typedef struct pool_thread_t {
  pool_t* pool;
  size_t worker;
} pool_thread_t;

struct pool_t {
  pthread_mutex_t lock;
  pthread_cond_t wake;       /* a new job was posted, or stop */
  pthread_cond_t done;       /* the last thread that joined the job left it */
  work_t* work;              /* the job threads may join; NULL once the caller is done */
  uint64_t generation;       /* jobs posted */
  size_t active;             /* threads in the current job */
  bool stop;
  size_t count;              /* threads running */
  pthread_t threads[MAX_THREADS];
  pool_thread_t args[MAX_THREADS];
};

/* Claims one unit at a time: a worker preempted mid-unit holds up the others for at
 * most that unit. A stopping run leaves the remaining units undone. */
static void claim_units(work_t* w, size_t worker) {
  for (size_t u; !stopping(0) && (u = atomic_fetch_add(&w->next, 1)) < w->units;) {
    w->fn(w->job, u, worker);
  }
}

static void* pool_thread(void* arg) {
  const pool_thread_t* self = arg;
  pool_t* p = self->pool;
  uint64_t seen = 0;
  pthread_mutex_lock(&p->lock);
  for (;;) {
    while (!p->stop && p->generation == seen) pthread_cond_wait(&p->wake, &p->lock);
    if (p->stop) break;
    seen = p->generation;
    work_t* w = p->work;
    if (!w || self->worker >= w->workers) continue;
    p->active++;
    pthread_mutex_unlock(&p->lock);
    t_control = w->control;
    t_work = 0;
    claim_units(w, self->worker);
    t_control = NULL;
    pthread_mutex_lock(&p->lock);
    if (--p->active == 0) pthread_cond_signal(&p->done);
  }
  pthread_mutex_unlock(&p->lock);
  return NULL;
}

/* Starts up to threads - 1 threads (workers 1, 2, ...); stops at the first that cannot
 * be created. */
static void pool_start(pool_t* p, size_t threads) {
  pthread_mutex_init(&p->lock, NULL);
  pthread_cond_init(&p->wake, NULL);
  pthread_cond_init(&p->done, NULL);
  p->work = NULL;
  p->generation = 0;
  p->active = 0;
  p->stop = false;
  p->count = 0;
  for (size_t i = 0; i + 1 < threads; i++) {
    p->args[i] = (pool_thread_t){p, i + 1};
    if (pthread_create(&p->threads[i], NULL, pool_thread, &p->args[i]) != 0) break;
    p->count++;
  }
}

static void pool_stop(pool_t* p) {
  pthread_mutex_lock(&p->lock);
  p->stop = true;
  pthread_cond_broadcast(&p->wake);
  pthread_mutex_unlock(&p->lock);
  for (size_t i = 0; i < p->count; i++) pthread_join(p->threads[i], NULL);
  pthread_cond_destroy(&p->done);
  pthread_cond_destroy(&p->wake);
  pthread_mutex_destroy(&p->lock);
}

/* Runs fn(job, u, worker) for every u < units on up to `workers` workers (at most the
 * pool's threads + 1; worker 0 is the caller). The caller claims units too and, once
 * none are left, waits only for the threads that joined: a thread not scheduled by then
 * (its CPU busy) does not hold it up. */
static void run_units(pool_t* p, unit_fn fn, const void* job, size_t units, size_t workers) {
  work_t work = {fn, job, units, workers, 0, t_control};
  if (workers == 1) {
    claim_units(&work, 0);
    return;
  }
  pthread_mutex_lock(&p->lock);
  p->work = &work;
  p->generation++;
  pthread_cond_broadcast(&p->wake);
  pthread_mutex_unlock(&p->lock);
  claim_units(&work, 0);
  pthread_mutex_lock(&p->lock);
  p->work = NULL;
  while (p->active) pthread_cond_wait(&p->done, &p->lock);
  pthread_mutex_unlock(&p->lock);
}

/* NPU_SIM_THREADS when it is a positive number, else the online CPUs; at most
 * MAX_THREADS. */
static size_t thread_count(void) {
  const char* env = getenv("NPU_SIM_THREADS");
  long n = env ? strtol(env, NULL, 10) : 0;
  if (n < 1) n = sysconf(_SC_NPROCESSORS_ONLN);
  if (n < 1) return 1;
  return n > MAX_THREADS ? MAX_THREADS : (size_t)n;
}

/* Workers for `macs` of work over `units` units (the pool may be NULL: one). */
static size_t worker_count(const pool_t* p, uint64_t macs, size_t units) {
  uint64_t workers = macs / MACS_PER_WORKER;
  size_t most = p ? p->count + 1 : 1;
  if (workers > most) workers = most;
  if (workers > units) workers = units;
  return workers ? (size_t)workers : 1;
}

/* ---- the core ----------------------------------------------------------- */

enum { SCRATCH_A, SCRATCH_B, SCRATCH_C, SCRATCH_COUNT };

typedef struct semaphore_t {
  uint64_t* times;        /* time of the i-th signal */
  size_t count;
  size_t capacity;
  int engine;             /* the signalling engine, -1 before the first signal */
} semaphore_t;

struct npu_core_t {
  npu_machine_config_t config;
  uint8_t* sram;
  void* scratch[SCRATCH_COUNT];
  size_t scratch_bytes[SCRATCH_COUNT];
  semaphore_t* semaphores;
  size_t threads;         /* most workers one instruction runs on */
  atomic_uint_fast64_t cancels;   /* npu_core_cancel calls */
};

static void* aligned_bytes(size_t bytes) {
  size_t rounded = (bytes + 63) & ~(size_t)63;
  return aligned_alloc(64, rounded ? rounded : 64);
}

npu_core_t* npu_core_create(const npu_machine_config_t* config) {
  const uint64_t* fields = (const uint64_t*)config;
  for (size_t i = 0; i < sizeof(*config) / sizeof(uint64_t); i++) {
    if (fields[i] == 0) return NULL;
  }
  if (config->sram_bytes > ((uint64_t)1 << 32) || config->semaphores > (1u << 16)) return NULL;
  npu_core_t* core = calloc(1, sizeof(*core));
  if (!core) return NULL;
  core->config = *config;
  core->threads = thread_count();
  core->sram = aligned_bytes(config->sram_bytes);
  core->semaphores = calloc(config->semaphores, sizeof(semaphore_t));
  if (!core->sram || !core->semaphores) {
    npu_core_destroy(core);
    return NULL;
  }
  memset(core->sram, 0, config->sram_bytes);
  return core;
}

void npu_core_cancel(npu_core_t* core) {
  atomic_fetch_add(&core->cancels, 1);
}

void npu_core_destroy(npu_core_t* core) {
  if (!core) return;
  free(core->sram);
  for (int i = 0; i < SCRATCH_COUNT; i++) free(core->scratch[i]);
  if (core->semaphores) {
    for (uint64_t i = 0; i < core->config.semaphores; i++) free(core->semaphores[i].times);
  }
  free(core->semaphores);
  free(core);
}

/* ---- execution context and errors --------------------------------------- */

typedef struct exec_t {
  npu_core_t* core;
  const npu_binding_t* bindings;
  size_t binding_count;
  const uint8_t* const_pool;
  size_t const_pool_bytes;
  npu_stats_t* stats;
  char* error;
  size_t error_capacity;
  size_t index;
  const op_info_t* op;    /* NULL while the opcode is unknown */
  pool_t* pool;           /* NULL: every instruction runs on the caller */
  const uint32_t* constants;     /* the dispatch's push constants (fill push_constant) */
  size_t constant_count;
} exec_t;

static int fail(exec_t* x, int status, const char* format, ...) {
  if (!x->error || x->error_capacity == 0) return status;
  int n = x->op ? snprintf(x->error, x->error_capacity, "instruction %zu (%s): ", x->index,
                           x->op->name)
                : snprintf(x->error, x->error_capacity, "instruction %zu: ", x->index);
  if (n >= 0 && (size_t)n < x->error_capacity) {
    va_list args;
    va_start(args, format);
    vsnprintf(x->error + n, x->error_capacity - (size_t)n, format, args);
    va_end(args);
  }
  return status;
}

typedef struct num_t { char s[48]; } num_t;

/* Decimal text of a 128-bit value (range ends can exceed 64 bits). */
static num_t num(u128 v) {
  num_t out;
  char digits[48];
  int n = 0;
  do {
    digits[n++] = (char)('0' + (int)(v % 10));
    v /= 10;
  } while (v);
  for (int i = 0; i < n; i++) out.s[i] = digits[n - 1 - i];
  out.s[n] = 0;
  return out;
}

static void* scratch(exec_t* x, int slot, u128 bytes) {
  npu_core_t* core = x->core;
  if (bytes > ((u128)1 << 40)) return NULL;
  if (core->scratch_bytes[slot] < (size_t)bytes) {
    free(core->scratch[slot]);
    core->scratch[slot] = aligned_bytes((size_t)bytes);
    core->scratch_bytes[slot] = core->scratch[slot] ? (size_t)bytes : 0;
  }
  return core->scratch[slot];
}

static int out_of_memory(exec_t* x, u128 bytes) {
  return fail(x, NPU_STATUS_RESOURCE_EXHAUSTED, "cannot allocate %s bytes of scratch",
              num(bytes).s);
}

/* ---- range checks (once per instruction, on box extents) ----------------- */

/* Byte extent of a box: (1 + sum (n_i - 1) * s_i) * elem (counts are at least 1). */
static u128 box_extent(const uint32_t* counts, const uint32_t* strides, int dims,
                       unsigned elem) {
  u128 span = 1;
  for (int d = 0; d < dims; d++) span += (u128)(counts[d] - 1) * strides[d];
  return span * elem;
}

/* Product of counts; UINT64_MAX when it overflows. */
static uint64_t product(const uint64_t* values, int n) {
  uint64_t p = 1;
  for (int i = 0; i < n; i++) {
    if (__builtin_mul_overflow(p, values[i], &p)) return UINT64_MAX;
  }
  return p;
}

static int check_work_limit(exec_t* x, const char* what, uint64_t work,
                            uint64_t per_sram_byte) {
  uint64_t limit = per_sram_byte * x->core->config.sram_bytes;
  if (work > limit) {
    return fail(x, NPU_STATUS_INVALID_ARGUMENT,
                "%s %s exceed the per-instruction limit %s (%llu per SRAM byte)",
                work == UINT64_MAX ? "more than 2^64" : num(work).s, what, num(limit).s,
                (unsigned long long)per_sram_byte);
  }
  return NPU_STATUS_OK;
}

/* The instruction's elements (MACs for MAC instructions) within the per-SRAM-byte bound. */
static int check_work(exec_t* x, const instr_t* in) {
  const uint32_t* a = in->a;
  uint64_t v[6];
  switch (in->opcode) {
    case OP_DMA_LOAD: case OP_DMA_STORE:
      for (int i = 0; i < 4; i++) v[i] = a[DMA_N0 + i];
      return check_work_limit(x, "elements", product(v, 4), ELEMENTS_PER_SRAM_BYTE);
    case OP_FILL:
      for (int i = 0; i < 4; i++) v[i] = a[FILL_N0 + i];
      return check_work_limit(x, "elements", product(v, 4), ELEMENTS_PER_SRAM_BYTE);
    case OP_MATMUL:
      v[0] = a[MATMUL_M], v[1] = a[MATMUL_N], v[2] = a[MATMUL_K];
      return check_work_limit(x, "MACs", product(v, 3), MACS_PER_SRAM_BYTE);
    case OP_CONV2D:
    case OP_DWCONV2D: {
      conv_args_t p = conv_args(in);
      v[0] = p.ho, v[1] = p.wo, v[2] = p.f, v[3] = p.c / p.groups, v[4] = p.kh, v[5] = p.kw;
      return check_work_limit(x, "MACs", product(v, 6), MACS_PER_SRAM_BYTE);
    }
    case OP_VPOOL:
      v[0] = a[VPOOL_C], v[1] = a[VPOOL_HO], v[2] = a[VPOOL_WO];
      v[3] = lo16(a[VPOOL_KH_KW]), v[4] = hi16(a[VPOOL_KH_KW]);
      return check_work_limit(x, "elements", product(v, 5), ELEMENTS_PER_SRAM_BYTE);
    case OP_VREDUCE:
      v[0] = a[VREDUCE_OUTER], v[1] = a[VREDUCE_INNER];
      return check_work_limit(x, "elements", product(v, 2), ELEMENTS_PER_SRAM_BYTE);
    default: {    /* the 3-D boxes of the binary, unary and vcvt vector ops */
      if (x->op->engine != ENGINE_VECTOR) return NPU_STATUS_OK;
      int n0 = vector_n0_field(x->op->layout);
      for (int i = 0; i < 3; i++) v[i] = a[n0 + i];
      return check_work_limit(x, "elements", product(v, 3), ELEMENTS_PER_SRAM_BYTE);
    }
  }
}

static int check_sram(exec_t* x, const char* operand, uint32_t addr, u128 extent,
                      unsigned align) {
  if (addr % align) {
    return fail(x, NPU_STATUS_INVALID_ARGUMENT,
                "%s SRAM address %u is not aligned to %u bytes", operand, addr, align);
  }
  if (extent == 0) return NPU_STATUS_OK;      /* an absent operand (bias without BIAS) */
  u128 end = (u128)addr + extent;
  if (end > x->core->config.sram_bytes) {
    return fail(x, NPU_STATUS_OUT_OF_RANGE, "%s SRAM range [%u, %s) exceeds sram_bytes %llu",
                operand, addr, num(end).s, (unsigned long long)x->core->config.sram_bytes);
  }
  if (end > x->stats->sram_peak_bytes) x->stats->sram_peak_bytes = (uint64_t)end;
  return NPU_STATUS_OK;
}

/* Disjointness of two SRAM byte ranges (an absent bias, extent 0, overlaps nothing). */
static int check_disjoint(exec_t* x, const char* out_name, uint32_t out, u128 out_extent,
                          const char* in_name, uint32_t in, u128 in_extent) {
  if (out_extent == 0 || in_extent == 0) return NPU_STATUS_OK;
  if ((u128)out < in + in_extent && (u128)in < out + out_extent) {
    return fail(x, NPU_STATUS_INVALID_ARGUMENT,
                "%s SRAM range [%u, %s) overlaps %s SRAM range [%u, %s)", out_name, out,
                num(out + out_extent).s, in_name, in, num(in + in_extent).s);
  }
  return NPU_STATUS_OK;
}

/* Resolves a DRAM box: binding, alignment, [offset, offset + extent) within it. */
static int check_dram(exec_t* x, uint32_t binding, uint32_t offset, u128 extent,
                      unsigned elem, bool store, uint8_t** out) {
  uint8_t* base;
  size_t length;
  if (binding == NPU_CONST_POOL_BINDING) {
    if (store) {
      return fail(x, NPU_STATUS_INVALID_ARGUMENT, "the constant pool is read-only");
    }
    base = (uint8_t*)x->const_pool;
    length = x->const_pool_bytes;
  } else if (binding >= x->binding_count) {
    return fail(x, NPU_STATUS_OUT_OF_RANGE, "binding %u out of range (%zu bindings)",
                binding, x->binding_count);
  } else {
    base = x->bindings[binding].data;
    length = x->bindings[binding].length;
  }
  if (offset % elem) {
    return fail(x, NPU_STATUS_INVALID_ARGUMENT,
                "DRAM offset %u is not aligned to %u bytes", offset, elem);
  }
  if ((u128)offset + extent > length) {
    if (binding == NPU_CONST_POOL_BINDING) {
      return fail(x, NPU_STATUS_OUT_OF_RANGE,
                  "DRAM range [%u, %s) exceeds the constant pool length %zu", offset,
                  num((u128)offset + extent).s, length);
    }
    return fail(x, NPU_STATUS_OUT_OF_RANGE, "DRAM range [%u, %s) exceeds binding %u length %zu",
                offset, num((u128)offset + extent).s, binding, length);
  }
  *out = base + offset;
  return NPU_STATUS_OK;
}

#define CHECK(expr)                          \
  do {                                       \
    int status_ = (expr);                    \
    if (status_ != NPU_STATUS_OK) return status_; \
  } while (0)

/* ---- static rules (docs/npu-architecture.md "Static rules", as the verifier) ---- */

/* Field names, for messages. */
static const char* field_name(int opcode, int index) {
  return LAYOUT_FIELDS[OPS[opcode].layout][index];
}

/* a[first .. first+count) are counts: each at least 1. */
static int check_counts(exec_t* x, const instr_t* in, int first, int count) {
  for (int i = first; i < first + count; i++) {
    if (in->a[i] == 0) {
      return fail(x, NPU_STATUS_INVALID_ARGUMENT, "%s must be at least 1",
                  field_name(in->opcode, i));
    }
  }
  return NPU_STATUS_OK;
}

static int check_fill(exec_t* x, const instr_t* in) {
  unsigned bits = DTYPE_BYTES[in->dtype] * 8;
  if (in->flags & FLAG_PUSH_CONSTANT) {
    if (bits != 32) {
      return fail(x, NPU_STATUS_INVALID_ARGUMENT, "a push constant fills 32-bit elements, not %s",
                  DTYPE_NAMES[in->dtype]);
    }
    if (in->a[FILL_VALUE] >= x->constant_count) {
      return fail(x, NPU_STATUS_INVALID_ARGUMENT, "fills push constant %u (%zu constants)",
                  in->a[FILL_VALUE], x->constant_count);
    }
  } else if (bits < 32 && (in->a[FILL_VALUE] >> bits)) {
    return fail(x, NPU_STATUS_INVALID_ARGUMENT, "value 0x%x does not fit %s",
                in->a[FILL_VALUE], DTYPE_NAMES[in->dtype]);
  }
  return check_counts(x, in, FILL_N0, 4);
}

static int check_mac_flags(exec_t* x, const instr_t* in, uint32_t bias) {
  if ((in->flags & FLAG_MIXED_SIGN) && !is_byte_int(in->dtype)) {
    return fail(x, NPU_STATUS_INVALID_ARGUMENT, "flag MIXED_SIGN needs i8 or u8 operands");
  }
  if ((in->flags & FLAG_ACCUMULATE) && (in->flags & FLAG_BIAS)) {
    return fail(x, NPU_STATUS_INVALID_ARGUMENT, "flags ACCUMULATE and BIAS are exclusive");
  }
  if (!(in->flags & FLAG_BIAS) && bias) {
    return fail(x, NPU_STATUS_INVALID_ARGUMENT, "bias field is %u without the BIAS flag", bias);
  }
  return NPU_STATUS_OK;
}

static int check_matmul(exec_t* x, const instr_t* in) {
  const uint32_t* a = in->a;
  CHECK(check_mac_flags(x, in, a[MATMUL_BIAS]));
  CHECK(check_counts(x, in, MATMUL_M, 3));
  uint32_t m = a[MATMUL_M], n = a[MATMUL_N], k = a[MATMUL_K];
  uint32_t lda = a[MATMUL_LDA], ldb = a[MATMUL_LDB], ldo = a[MATMUL_LDO];
  uint32_t a_row = (in->flags & FLAG_TRANSPOSE_A) ? m : k;
  uint32_t b_row = (in->flags & FLAG_TRANSPOSE_B) ? k : n;
  if (lda < a_row || ldb < b_row || ldo < n) {
    return fail(x, NPU_STATUS_INVALID_ARGUMENT,
                "leading dimensions lda %u, ldb %u, ldo %u are below the stored rows %u, %u, %u",
                lda, ldb, ldo, a_row, b_row, n);
  }
  return NPU_STATUS_OK;
}

/* Kernel, stride and dilation pairs at least 1; windows inside the hi x wi tile. */
static int check_windows(exec_t* x, uint32_t hi, uint32_t wi, uint32_t ho, uint32_t wo,
                         uint32_t kernel, uint32_t stride, uint32_t dilation) {
  uint32_t kh = lo16(kernel), kw = hi16(kernel), sh = lo16(stride), sw = hi16(stride);
  uint32_t dh = lo16(dilation), dw = hi16(dilation);
  if (!kh || !kw || !sh || !sw || !dh || !dw) {
    return fail(x, NPU_STATUS_INVALID_ARGUMENT,
                "kernel %ux%u, stride %ux%u and dilation %ux%u must be at least 1", kh, kw, sh,
                sw, dh, dw);
  }
  uint64_t rows = (uint64_t)(ho - 1) * sh + (uint64_t)(kh - 1) * dh + 1;
  uint64_t cols = (uint64_t)(wo - 1) * sw + (uint64_t)(kw - 1) * dw + 1;
  if (rows > hi || cols > wi) {
    return fail(x, NPU_STATUS_INVALID_ARGUMENT,
                "windows span %llux%llu input elements but the tile is %ux%u",
                (unsigned long long)rows, (unsigned long long)cols, hi, wi);
  }
  return NPU_STATUS_OK;
}

static int check_conv2d(exec_t* x, const instr_t* in) {
  const uint32_t* a = in->a;
  CHECK(check_mac_flags(x, in, a[CONV2D_BIAS]));
  CHECK(check_counts(x, in, CONV2D_C, 6));     /* c, hi, wi, f, ho, wo */
  uint32_t c = a[CONV2D_C], f = a[CONV2D_F], groups = a[CONV2D_GROUPS];
  if (groups == 0 || c % groups || f % groups) {
    return fail(x, NPU_STATUS_INVALID_ARGUMENT, "groups %u must divide c %u and f %u", groups,
                c, f);
  }
  return check_windows(x, a[CONV2D_HI], a[CONV2D_WI], a[CONV2D_HO], a[CONV2D_WO],
                       a[CONV2D_KH_KW], a[CONV2D_SH_SW], a[CONV2D_DH_DW]);
}

static int check_dwconv2d(exec_t* x, const instr_t* in) {
  const uint32_t* a = in->a;
  CHECK(check_mac_flags(x, in, a[DWCONV2D_BIAS]));
  CHECK(check_counts(x, in, DWCONV2D_C, 5));   /* c, hi, wi, ho, wo */
  return check_windows(x, a[DWCONV2D_HI], a[DWCONV2D_WI], a[DWCONV2D_HO], a[DWCONV2D_WO],
                       a[DWCONV2D_KH_KW], a[DWCONV2D_SH_SW], a[DWCONV2D_DH_DW]);
}

static int check_vpool(exec_t* x, const instr_t* in) {
  const uint32_t* a = in->a;
  if ((in->flags & FLAG_COUNT_INCLUDE_PAD) && !(in->flags & FLAG_POOL_AVG)) {
    return fail(x, NPU_STATUS_INVALID_ARGUMENT, "flag COUNT_INCLUDE_PAD needs POOL_AVG");
  }
  CHECK(check_counts(x, in, VPOOL_C, 5));      /* c, hi, wi, ho, wo */
  uint32_t hi = a[VPOOL_HI], wi = a[VPOOL_WI];
  CHECK(check_windows(x, hi, wi, a[VPOOL_HO], a[VPOOL_WO], a[VPOOL_KH_KW], a[VPOOL_SH_SW],
                      a[VPOOL_DH_DW]));
  uint32_t pt = lo16(a[VPOOL_PT_PL]), pl = hi16(a[VPOOL_PT_PL]);
  uint32_t vh = lo16(a[VPOOL_VH_VW]), vw = hi16(a[VPOOL_VH_VW]);
  if (pt + vh > hi || pl + vw > wi) {
    return fail(x, NPU_STATUS_INVALID_ARGUMENT,
                "valid region rows [%u, %u) cols [%u, %u) exceeds the %ux%u tile", pt, pt + vh,
                pl, pl + vw, hi, wi);
  }
  return NPU_STATUS_OK;
}

/* ---- structural validation (pre-pass) ------------------------------------ */

/* A semaphore has one signalling engine; a wait follows at least `value` signals. Counts
 * signals into semaphore_t.count. */
static int check_semaphore(exec_t* x, const instr_t* in) {
  _Static_assert(SIGNAL_ENGINE == WAIT_ENGINE && SIGNAL_SEM == WAIT_SEM, "one layout");
  uint32_t engine = in->a[SIGNAL_ENGINE], sem = in->a[SIGNAL_SEM];
  semaphore_t* s = &x->core->semaphores[sem];
  if (in->opcode == OP_SIGNAL) {
    if (s->engine >= 0 && s->engine != (int)engine) {
      return fail(x, NPU_STATUS_INVALID_ARGUMENT,
                  "semaphore %u is signalled from engine %d and engine %u", sem, s->engine,
                  engine);
    }
    s->engine = (int)engine;
    s->count++;
  } else if (in->a[WAIT_VALUE] > s->count) {
    return fail(x, NPU_STATUS_INVALID_ARGUMENT,
                "waits for signal %u of semaphore %u but only %zu precede it", in->a[WAIT_VALUE],
                sem, s->count);
  }
  return NPU_STATUS_OK;
}

/* Makes room for the signals counted by the pre-pass and rewinds the counts. */
static int reserve_signals(exec_t* x) {
  npu_core_t* core = x->core;
  for (uint64_t i = 0; i < core->config.semaphores; i++) {
    semaphore_t* s = &core->semaphores[i];
    if (s->count > s->capacity) {
      uint64_t* times = realloc(s->times, s->count * sizeof(uint64_t));
      if (!times) return out_of_memory(x, s->count * sizeof(uint64_t));
      s->times = times;
      s->capacity = s->count;
    }
    s->count = 0;
  }
  return NPU_STATUS_OK;
}

static int check_encoding(exec_t* x, const instr_t* in) {
  const op_info_t* op = &OPS[in->opcode];
  if (!op->name) {
    return fail(x, NPU_STATUS_INVALID_ARGUMENT, "invalid opcode %u", in->opcode);
  }
  x->op = op;
  if (in->dtype >= DT_COUNT || !(op->dtypes & DTM(in->dtype))) {
    if (in->dtype >= DT_COUNT) {
      return fail(x, NPU_STATUS_INVALID_ARGUMENT, "invalid dtype %u", in->dtype);
    }
    return fail(x, NPU_STATUS_INVALID_ARGUMENT, "dtype %s is not allowed",
                DTYPE_NAMES[in->dtype]);
  }
  if (in->flags & ~op->flags) {
    return fail(x, NPU_STATUS_INVALID_ARGUMENT, "invalid flags 0x%x", in->flags);
  }
  for (int i = op->used_fields; i < OPERAND_COUNT; i++) {
    if (in->a[i] != 0) {
      return fail(x, NPU_STATUS_INVALID_ARGUMENT, "unused field a[%d] must be zero, got %u",
                  i, in->a[i]);
    }
  }
  switch (in->opcode) {
    case OP_SIGNAL:
    case OP_WAIT:
      if (in->a[SIGNAL_ENGINE] >= NPU_ENGINE_COUNT) {
        return fail(x, NPU_STATUS_INVALID_ARGUMENT, "invalid engine %u", in->a[SIGNAL_ENGINE]);
      }
      if (in->a[SIGNAL_SEM] >= x->core->config.semaphores) {
        return fail(x, NPU_STATUS_INVALID_ARGUMENT, "semaphore %u out of range (%llu semaphores)",
                    in->a[SIGNAL_SEM], (unsigned long long)x->core->config.semaphores);
      }
      return NPU_STATUS_OK;
    case OP_DMA_LOAD:
    case OP_DMA_STORE:
      return check_counts(x, in, DMA_N0, 4);
    case OP_FILL:
      return check_fill(x, in);
    case OP_MATMUL:
      return check_matmul(x, in);
    case OP_CONV2D:
      return check_conv2d(x, in);
    case OP_DWCONV2D:
      return check_dwconv2d(x, in);
    case OP_VPOOL:
      return check_vpool(x, in);
    case OP_VREDUCE:
      if ((in->flags & FLAG_REDUCE_MAX) && (in->flags & FLAG_REDUCE_MEAN)) {
        return fail(x, NPU_STATUS_INVALID_ARGUMENT, "flags REDUCE_MAX and REDUCE_MEAN are exclusive");
      }
      return check_counts(x, in, VREDUCE_OUTER, 2);
    case OP_VROUND:
      if (__builtin_popcount(in->flags) > 1) {
        return fail(x, NPU_STATUS_INVALID_ARGUMENT, "flags FLOOR, CEIL and HALF_AWAY are exclusive");
      }
      return check_counts(x, in, UNARY_N0, 3);
    case OP_VCVT:
      if (in->a[VCVT_SRC_DTYPE] >= DT_COUNT) {
        return fail(x, NPU_STATUS_INVALID_ARGUMENT, "invalid src_dtype %u", in->a[VCVT_SRC_DTYPE]);
      }
      return check_counts(x, in, VCVT_N0, 3);
    default:      /* binary and unary vector ops: their boxes' counts */
      if (x->op->engine != ENGINE_VECTOR) return NPU_STATUS_OK;
      return check_counts(x, in, vector_n0_field(x->op->layout), 3);
  }
}

/* ---- DMA and fill --------------------------------------------------------- */

static int exec_dma(exec_t* x, const instr_t* in, bool store) {
  const uint32_t* a = in->a;
  unsigned elem = DTYPE_BYTES[in->dtype];
  const uint32_t* counts = a + DMA_N0;          /* n0..n3 */
  const uint32_t* dram_s = a + DMA_DRAM_S0;     /* dram_s0..dram_s3 */
  const uint32_t* sram_s = a + DMA_SRAM_S0;     /* sram_s0..sram_s3 */
  uint8_t* dram = NULL;
  CHECK(check_dram(x, a[DMA_BINDING], a[DMA_DRAM_OFFSET], box_extent(counts, dram_s, 4, elem),
                   elem, store, &dram));
  CHECK(check_sram(x, "sram", a[DMA_SRAM_ADDR], box_extent(counts, sram_s, 4, elem), elem));
  uint8_t* sram = x->core->sram + a[DMA_SRAM_ADDR];
  uint8_t* dst = store ? dram : sram;
  const uint8_t* src = store ? sram : dram;
  const uint32_t* ds = store ? dram_s : sram_s;
  const uint32_t* ss = store ? sram_s : dram_s;
  for (size_t i0 = 0; i0 < counts[0]; i0++) {
    for (size_t i1 = 0; i1 < counts[1]; i1++) {
      for (size_t i2 = 0; i2 < counts[2]; i2++) {
        size_t d = (i0 * ds[0] + i1 * ds[1] + i2 * ds[2]) * elem;
        size_t s = (i0 * ss[0] + i1 * ss[1] + i2 * ss[2]) * elem;
        if (!copy_run_polled(dst + d, ds[3], src + s, ss[3], counts[3], elem)) {
          return NPU_STATUS_OK;     /* stopping: the caller reports why */
        }
      }
    }
  }
  return NPU_STATUS_OK;
}

static void fill_run(uint8_t* dst, size_t stride, size_t n, unsigned elem, uint32_t value) {
  switch (elem) {
    case 1:
      for (size_t i = 0; i < n; i++) dst[i * stride] = (uint8_t)value;
      break;
    case 2: {
      uint16_t* d = (uint16_t*)dst;
      for (size_t i = 0; i < n; i++) d[i * stride] = (uint16_t)value;
      break;
    }
    default: {
      uint32_t* d = (uint32_t*)dst;
      for (size_t i = 0; i < n; i++) d[i * stride] = value;
      break;
    }
  }
}

static int exec_fill(exec_t* x, const instr_t* in) {
  const uint32_t* a = in->a;
  unsigned elem = DTYPE_BYTES[in->dtype];
  const uint32_t* counts = a + FILL_N0;     /* n0..n3 */
  const uint32_t* s = a + FILL_S0;          /* s0..s3 */
  CHECK(check_sram(x, "sram", a[FILL_SRAM_ADDR], box_extent(counts, s, 4, elem), elem));
  uint8_t* base = x->core->sram + a[FILL_SRAM_ADDR];
  uint32_t value = a[FILL_VALUE];
  if (in->flags & FLAG_PUSH_CONSTANT) value = x->constants[value];
  for (size_t i0 = 0; i0 < counts[0]; i0++) {
    for (size_t i1 = 0; i1 < counts[1]; i1++) {
      for (size_t i2 = 0; i2 < counts[2]; i2++) {
        size_t d = (i0 * s[0] + i1 * s[1] + i2 * s[2]) * elem;
        for (size_t i = 0; i < counts[3]; i += RUN_PIECE) {
          size_t len = counts[3] - i < RUN_PIECE ? counts[3] - i : RUN_PIECE;
          fill_run(base + d + i * s[3] * elem, s[3], len, elem, value);
          if (stopping_elements(len)) return NPU_STATUS_OK;
        }
      }
    }
  }
  return NPU_STATUS_OK;
}

/* ---- MAC array ------------------------------------------------------------ */

/* Rows of a transposed operand converted per memory run: at most this many at once. */
#define PACK_RUN 64

/* Packs a transposed rows x cols matrix (element (r, c) at base + (r + c*col_stride))
 * reading it along its memory runs (r contiguous), PACK_RUN elements at a time, so each
 * source line is read once; packing it row by row read every element from another line
 * (a transposed 512x32 B took 16 times as long as the matmul that used it). */
static void pack_transposed(int dtype, const uint8_t* base, size_t rows, size_t cols,
                            size_t col_stride, void* out) {
  unsigned elem = DTYPE_BYTES[dtype];
  uint32_t run[PACK_RUN];
  for (size_t r0 = 0; r0 < rows; r0 += PACK_RUN) {
    size_t count = rows - r0 < PACK_RUN ? rows - r0 : PACK_RUN;
    for (size_t c = 0; c < cols; c++) {
      const uint8_t* src = base + (c * col_stride + r0) * elem;
      if (is_byte_int(dtype)) {
        load_i32(dtype, src, 1, count, (int32_t*)run);
      } else {
        load_f32(dtype, src, 1, count, (float*)run);
      }
      uint32_t* o = (uint32_t*)out + r0 * cols + c;
      for (size_t i = 0; i < count; i++) o[i * cols] = run[i];
    }
  }
}

/* Packs a rows x cols matrix (element (r, c) at base + (r*row_stride + c*col_stride))
 * of a MAC operand dtype into dense f32 (floats) or i32 (i8). */
static void pack_matrix(int dtype, const uint8_t* base, size_t rows, size_t cols,
                        size_t row_stride, size_t col_stride, void* out) {
  unsigned elem = DTYPE_BYTES[dtype];
  if (row_stride == 1 && col_stride != 1 && cols > 1) {
    pack_transposed(dtype, base, rows, cols, col_stride, out);
    return;
  }
  for (size_t r = 0; r < rows; r++) {
    const uint8_t* src = base + r * row_stride * elem;
    if (is_byte_int(dtype)) {
      load_i32(dtype, src, col_stride, cols, (int32_t*)out + r * cols);
    } else {
      load_f32(dtype, src, col_stride, cols, (float*)out + r * cols);
    }
  }
}

/* Sets rows x cols of an accumulator matrix (4-byte elements, row stride ld) to bias[c]
 * or zero. */
static void init_accumulator(uint8_t* out, size_t rows, size_t cols, size_t ld,
                             const uint32_t* bias_by_col, const uint32_t* bias_by_row) {
  uint32_t* o = (uint32_t*)out;
  for (size_t r = 0; r < rows; r++) {
    uint32_t* row = o + r * ld;
    if (bias_by_col) {
      memcpy(row, bias_by_col, cols * 4);
    } else {
      uint32_t v = bias_by_row ? bias_by_row[r] : 0;
      for (size_t c = 0; c < cols; c++) row[c] = v;
    }
  }
}

/* A packed matmul: A [m][k] with row stride lda and dense B [k][n] (with GEMM_NR
 * elements of slack) into C with row stride ldc, split over panels of columns or tiles
 * of rows. */
typedef struct gemm_job_t {
  bool i32;
  size_t m, n, k;
  const void* a;
  size_t lda;
  const void* b;
  uint8_t* c;
  size_t ldc;
  bool by_columns;
} gemm_job_t;

static size_t ceil_units(size_t count, size_t unit) { return (count + unit - 1) / unit; }

static void gemm_block(const gemm_job_t* g, size_t i0, size_t i1, size_t j0, size_t j1) {
  size_t k = g->k, n = g->n;
  uint8_t* c = g->c + (i0 * g->ldc + j0) * 4;
  if (g->i32) {
    gemm_i32(i1 - i0, j1 - j0, k, (const int32_t*)g->a + i0 * g->lda, g->lda,
             (const int32_t*)g->b + j0, n, (int32_t*)c, g->ldc);
  } else {
    gemm_f32(i1 - i0, j1 - j0, k, (const float*)g->a + i0 * g->lda, g->lda,
             (const float*)g->b + j0, n, (float*)c, g->ldc);
  }
}

/* Columns of C per unit of a split by columns: whole panels of GEMM_NR, and 256 bytes of
 * each row of C, so two workers do not write neighbouring cache lines (narrower units
 * halved the speed of two threads: each tile's row of C then shares its 128-byte pair
 * of lines, which the CPU fetches together, with the other worker's). */
#define GEMM_UNIT_COLS 32
_Static_assert(GEMM_UNIT_COLS % GEMM_NR == 0, "units are whole panels");

/* Unit u: the u-th GEMM_UNIT_COLS columns or tile of GEMM_MR rows. */
static void gemm_unit(const void* job, size_t u, size_t worker) {
  (void)worker;
  const gemm_job_t* g = job;
  if (g->by_columns) {
    size_t j0 = u * GEMM_UNIT_COLS, j1 = j0 + GEMM_UNIT_COLS < g->n ? j0 + GEMM_UNIT_COLS : g->n;
    gemm_block(g, 0, g->m, j0, j1);
  } else {
    size_t i0 = u * GEMM_MR, i1 = i0 + GEMM_MR < g->m ? i0 + GEMM_MR : g->m;
    gemm_block(g, i0, i1, 0, g->n);
  }
}

static int exec_matmul(exec_t* x, const instr_t* in) {
  const uint32_t* a = in->a;
  int dt = in->dtype;
  unsigned elem = DTYPE_BYTES[dt];
  uint32_t m = a[MATMUL_M], n = a[MATMUL_N], k = a[MATMUL_K];
  uint32_t lda = a[MATMUL_LDA], ldb = a[MATMUL_LDB], ldo = a[MATMUL_LDO];
  uint32_t a_addr = a[MATMUL_A], b_addr = a[MATMUL_B], out_addr = a[MATMUL_OUT];
  uint32_t bias_addr = a[MATMUL_BIAS];
  bool ta = in->flags & FLAG_TRANSPOSE_A, tb = in->flags & FLAG_TRANSPOSE_B;
  bool bias = in->flags & FLAG_BIAS, acc = in->flags & FLAG_ACCUMULATE;
  uint32_t a_counts[2] = {ta ? k : m, ta ? m : k}, a_strides[2] = {lda, 1};
  uint32_t b_counts[2] = {tb ? n : k, tb ? k : n}, b_strides[2] = {ldb, 1};
  uint32_t o_counts[2] = {m, n}, o_strides[2] = {ldo, 1};
  u128 a_ext = box_extent(a_counts, a_strides, 2, elem);
  u128 b_ext = box_extent(b_counts, b_strides, 2, elem);
  u128 o_ext = box_extent(o_counts, o_strides, 2, 4);
  u128 bias_ext = bias ? (u128)n * 4 : 0;
  CHECK(check_sram(x, "a", a_addr, a_ext, elem));
  CHECK(check_sram(x, "b", b_addr, b_ext, elem));
  CHECK(check_sram(x, "out", out_addr, o_ext, 4));
  CHECK(check_sram(x, "bias", bias_addr, bias_ext, 4));
  CHECK(check_disjoint(x, "out", out_addr, o_ext, "a", a_addr, a_ext));
  CHECK(check_disjoint(x, "out", out_addr, o_ext, "b", b_addr, b_ext));
  CHECK(check_disjoint(x, "out", out_addr, o_ext, "bias", bias_addr, bias_ext));

  uint8_t* sram = x->core->sram;
  /* An f32 A in rows is used in place; others are packed as [m][k] (element (i, kk) is
   * at lda*kk + i when transposed). A dense f32 B [k][n] with GEMM_NR elements of SRAM
   * after it (the kernel's readable slack) is used in place too: a matrix-vector
   * product (m = 1, an LSTM step) would otherwise spend as long copying B as using it. */
  bool a_in_place = dt == DT_F32 && !ta;
  bool b_in_place = dt == DT_F32 && !tb && ldb == n &&
                    (u128)b_addr + b_ext + GEMM_NR * 4 <= x->core->config.sram_bytes;
  void* ap = a_in_place ? sram + a_addr : scratch(x, SCRATCH_A, (u128)m * k * 4 + 4);
  void* bp = b_in_place ? sram + b_addr : scratch(x, SCRATCH_B, (u128)k * n * 4 + GEMM_NR * 4);
  if (!ap) return out_of_memory(x, (u128)m * k * 4);
  if (!bp) return out_of_memory(x, (u128)k * n * 4);
  if (!a_in_place) pack_matrix(dt, sram + a_addr, m, k, ta ? 1 : lda, ta ? lda : 1, ap);
  if (!b_in_place) pack_matrix(mac_b_dtype(in), sram + b_addr, k, n, tb ? 1 : ldb, tb ? ldb : 1, bp);
  uint8_t* out = sram + out_addr;
  if (!acc) {
    init_accumulator(out, m, n, ldo, bias ? (const uint32_t*)(sram + bias_addr) : NULL, NULL);
  }
  gemm_job_t job = {is_byte_int(dt), m, n, k, ap, a_in_place ? lda : k, bp, out, ldo, n >= m};
  size_t units = job.by_columns ? ceil_units(n, GEMM_UNIT_COLS) : ceil_units(m, GEMM_MR);
  run_units(x->pool, gemm_unit, &job, units, worker_count(x->pool, (uint64_t)m * n * k, units));
  return NPU_STATUS_OK;
}

/* Output rows per im2col chunk target this many columns. */
#define CONV_CHUNK_COLUMNS 256

/* A conv2d as chunks of output rows of one group each: im2col of the chunk into the
 * worker's own `col` buffer, then one GEMM with the group's packed weights. */
typedef struct conv_job_t {
  int dtype;
  size_t cg, hi, wi, fg, wo, ho, kh, kw, sh, sw, dh, dw, groups;
  const uint8_t* in;
  const void* weights;     /* [f][kdim] f32 or i32: the SRAM operand if f32, else packed */
  uint8_t* out;
  uint8_t* col;            /* one buffer of col_bytes per worker */
  size_t col_bytes;
  size_t chunk_rows, chunks;
} conv_job_t;

/* Columns of the chunk of output rows starting at y0. */
static size_t conv_chunk_cols(const conv_job_t* j, size_t y0) {
  return (j->ho - y0 < j->chunk_rows ? j->ho - y0 : j->chunk_rows) * j->wo;
}

/* The kh*kw rows of input channel ci in the im2col of chunk y0 of group g:
 * col[(ci*kh + ky)*kw + kx][(y - y0)*wo + xo] = in[ci][y*sh + ky*dh][xo*sw + kx*dw]. */
static void conv_im2col_channel(const conv_job_t* j, uint8_t* col, size_t g, size_t y0,
                                size_t ci) {
  unsigned elem = DTYPE_BYTES[j->dtype];
  size_t wo = j->wo, cols = conv_chunk_cols(j, y0), rows = cols / wo;
  const uint8_t* in_c = j->in + (g * j->cg + ci) * j->hi * j->wi * elem;
  size_t r = ci * j->kh * j->kw;
  for (size_t ky = 0; ky < j->kh; ky++) {
    for (size_t kx = 0; kx < j->kw; kx++, r++) {
      for (size_t y = 0; y < rows; y++) {
        const uint8_t* src = in_c + (((y0 + y) * j->sh + ky * j->dh) * j->wi + kx * j->dw) * elem;
        size_t at = r * cols + y * wo;
        if (is_byte_int(j->dtype)) {
          load_i32(j->dtype, src, j->sw, wo, (int32_t*)col + at);
        } else {
          load_f32(j->dtype, src, j->sw, wo, (float*)col + at);
        }
      }
    }
  }
}

/* Fills `col` with the im2col of chunk y0 of group g; returns its column count. */
static size_t conv_im2col(const conv_job_t* j, uint8_t* col, size_t g, size_t y0) {
  for (size_t ci = 0; ci < j->cg; ci++) conv_im2col_channel(j, col, g, y0, ci);
  return conv_chunk_cols(j, y0);
}

/* The GEMM of chunk y0 of group g: the group's weights times its `cols` columns. */
static gemm_job_t conv_gemm(const conv_job_t* j, const uint8_t* col, size_t cols, size_t g,
                            size_t y0) {
  size_t kdim = j->cg * j->kh * j->kw, spatial = j->ho * j->wo;
  const uint8_t* w = (const uint8_t*)j->weights + g * j->fg * kdim * 4;
  uint8_t* o = j->out + (g * j->fg * spatial + y0 * j->wo) * 4;
  return (gemm_job_t){is_byte_int(j->dtype), j->fg, cols, kdim, w, kdim, col, o, spatial,
                      cols >= j->fg};
}

/* Unit u: chunk u % chunks of group u / chunks, all on one worker. */
static void conv_unit(const void* job, size_t u, size_t worker) {
  const conv_job_t* j = job;
  uint8_t* col = j->col + worker * j->col_bytes;
  size_t g = u / j->chunks, y0 = u % j->chunks * j->chunk_rows;
  size_t cols = conv_im2col(j, col, g, y0);
  if (stopping((uint64_t)cols * j->cg * j->kh * j->kw)) return;
  gemm_job_t gemm = conv_gemm(j, col, cols, g, y0);
  gemm_block(&gemm, 0, gemm.m, 0, gemm.n);
}

/* One chunk's im2col split by input channel. */
typedef struct im2col_job_t {
  const conv_job_t* conv;
  uint8_t* col;
  size_t g, y0;
} im2col_job_t;

static void im2col_unit(const void* job, size_t ci, size_t worker) {
  (void)worker;
  const im2col_job_t* i = job;
  conv_im2col_channel(i->conv, i->col, i->g, i->y0, ci);
}

/* Fewer chunks than workers: each chunk's im2col split by channel, then its GEMM by
 * columns or rows. */
static void conv_split_chunks(exec_t* x, const conv_job_t* j) {
  for (size_t g = 0; g < j->groups; g++) {
    for (size_t y0 = 0; y0 < j->ho; y0 += j->chunk_rows) {
      if (stopping(0)) return;
      gemm_job_t gemm = conv_gemm(j, j->col, conv_chunk_cols(j, y0), g, y0);
      uint64_t macs = (uint64_t)gemm.m * gemm.n * gemm.k;
      im2col_job_t im2col = {j, j->col, g, y0};
      run_units(x->pool, im2col_unit, &im2col, j->cg, worker_count(x->pool, macs, j->cg));
      size_t units = gemm.by_columns ? ceil_units(gemm.n, GEMM_UNIT_COLS) : ceil_units(gemm.m, GEMM_MR);
      run_units(x->pool, gemm_unit, &gemm, units, worker_count(x->pool, macs, units));
    }
  }
}

/* conv2d and dwconv2d (conv_args). */
static int exec_conv2d(exec_t* x, const instr_t* in) {
  conv_args_t p = conv_args(in);
  int dt = in->dtype;
  unsigned elem = DTYPE_BYTES[dt];
  uint32_t c = p.c, hi = p.hi, wi = p.wi, f = p.f, ho = p.ho, wo = p.wo;
  uint32_t kh = p.kh, kw = p.kw, sh = p.sh, sw = p.sw, dh = p.dh, dw = p.dw, groups = p.groups;
  bool bias = in->flags & FLAG_BIAS, acc = in->flags & FLAG_ACCUMULATE;
  uint32_t cg = c / groups, fg = f / groups;
  u128 in_ext = (u128)c * hi * wi * elem;
  u128 w_ext = (u128)f * cg * kh * kw * elem;
  u128 o_ext = (u128)f * ho * wo * 4;
  u128 bias_ext = bias ? (u128)f * 4 : 0;
  CHECK(check_sram(x, "in", p.in, in_ext, elem));
  CHECK(check_sram(x, "w", p.w, w_ext, elem));
  CHECK(check_sram(x, "out", p.out, o_ext, 4));
  CHECK(check_sram(x, "bias", p.bias, bias_ext, 4));
  CHECK(check_disjoint(x, "out", p.out, o_ext, "in", p.in, in_ext));
  CHECK(check_disjoint(x, "out", p.out, o_ext, "w", p.w, w_ext));
  CHECK(check_disjoint(x, "out", p.out, o_ext, "bias", p.bias, bias_ext));

  uint8_t* sram = x->core->sram;
  size_t spatial = (size_t)ho * wo;
  size_t kdim = (size_t)cg * kh * kw;
  size_t chunk_rows = wo >= CONV_CHUNK_COLUMNS ? 1 : CONV_CHUNK_COLUMNS / wo;
  if (chunk_rows > ho) chunk_rows = ho;
  size_t chunks = ceil_units(ho, chunk_rows);
  uint64_t macs = (uint64_t)f * spatial * kdim;
  size_t units = (size_t)groups * chunks;
  size_t workers = worker_count(x->pool, macs, SIZE_MAX);
  /* Each worker's col buffer, with the GEMM's slack, rounded to 64 bytes. */
  size_t col_bytes = (kdim * chunk_rows * wo * 4 + GEMM_NR * 4 + 63) & ~(size_t)63;
  void* wp = dt == DT_F32 ? sram + p.w : scratch(x, SCRATCH_A, (u128)f * kdim * 4 + 4);
  void* col = scratch(x, SCRATCH_B, (u128)col_bytes * workers);
  if (!wp) return out_of_memory(x, (u128)f * kdim * 4);
  if (!col) return out_of_memory(x, (u128)col_bytes * workers);
  uint8_t* out = sram + p.out;
  if (!acc) {
    init_accumulator(out, f, spatial, spatial, NULL,
                     bias ? (const uint32_t*)(sram + p.bias) : NULL);
  }
  if (dt != DT_F32) pack_matrix(mac_b_dtype(in), sram + p.w, f, kdim, kdim, 1, wp);
  conv_job_t job = {dt, cg, hi, wi, fg, wo, ho, kh, kw, sh, sw, dh, dw, groups,
                    sram + p.in, wp, out, col, col_bytes, chunk_rows, chunks};
  if (workers == 1 || units >= 2 * workers) {
    run_units(x->pool, conv_unit, &job, units, workers);
  } else {
    conv_split_chunks(x, &job);
  }
  return NPU_STATUS_OK;
}

/* ---- vector unit ---------------------------------------------------------- */

#define CHUNK 512

typedef struct box3_t {
  const char* name;
  uint32_t addr;
  const uint32_t* strides;   /* 3 element strides */
  int dtype;
} box3_t;

static int check_box3(exec_t* x, const box3_t* b, const uint32_t* counts) {
  unsigned elem = DTYPE_BYTES[b->dtype];
  return check_sram(x, b->name, b->addr, box_extent(counts, b->strides, 3, elem), elem);
}

static uint8_t* box3_row(exec_t* x, const box3_t* b, size_t i0, size_t i1) {
  return x->core->sram + b->addr +
         (i0 * b->strides[0] + i1 * b->strides[1]) * DTYPE_BYTES[b->dtype];
}

static void binary_f32(int op, float* restrict d, const float* restrict l,
                       const float* restrict r, size_t n) {
  switch (op) {
    /* d holds the addend: lhs·rhs + d rounded once, as LLVM contracts fmul + fadd */
    case OP_VFMA: for (size_t i = 0; i < n; i++) d[i] = fmaf(l[i], r[i], d[i]); break;
    case OP_VADD: for (size_t i = 0; i < n; i++) d[i] = l[i] + r[i]; break;
    case OP_VSUB: for (size_t i = 0; i < n; i++) d[i] = l[i] - r[i]; break;
    case OP_VMUL: for (size_t i = 0; i < n; i++) d[i] = l[i] * r[i]; break;
    case OP_VMAX: for (size_t i = 0; i < n; i++) d[i] = NPU_MAX(l[i], r[i]); break;
    case OP_VMIN: for (size_t i = 0; i < n; i++) d[i] = NPU_MIN(l[i], r[i]); break;
    default: for (size_t i = 0; i < n; i++) d[i] = l[i] / r[i]; break;
  }
}

/* i32 arithmetic wraps; division truncates, x / 0 = 0 and INT32_MIN / -1 wraps. */
static void binary_i32(int op, int32_t* restrict d, const int32_t* restrict l,
                       const int32_t* restrict r, size_t n) {
  switch (op) {
    case OP_VADD: for (size_t i = 0; i < n; i++) d[i] = (int32_t)((uint32_t)l[i] + (uint32_t)r[i]); break;
    case OP_VSUB: for (size_t i = 0; i < n; i++) d[i] = (int32_t)((uint32_t)l[i] - (uint32_t)r[i]); break;
    case OP_VMUL: for (size_t i = 0; i < n; i++) d[i] = (int32_t)((uint32_t)l[i] * (uint32_t)r[i]); break;
    case OP_VMAX: for (size_t i = 0; i < n; i++) d[i] = l[i] > r[i] ? l[i] : r[i]; break;
    case OP_VMIN: for (size_t i = 0; i < n; i++) d[i] = l[i] < r[i] ? l[i] : r[i]; break;
    default:
      for (size_t i = 0; i < n; i++) {
        d[i] = r[i] == 0 ? 0 : r[i] == -1 ? (int32_t)(0u - (uint32_t)l[i]) : l[i] / r[i];
      }
      break;
  }
}

static int exec_binary(exec_t* x, const instr_t* in) {
  const uint32_t* a = in->a;
  const uint32_t* counts = a + BINARY_N0;
  box3_t dst = {"dst", a[BINARY_DST], a + BINARY_DST_S0, in->dtype};
  box3_t lhs = {"lhs", a[BINARY_LHS], a + BINARY_LHS_S0, in->dtype};
  box3_t rhs = {"rhs", a[BINARY_RHS], a + BINARY_RHS_S0, in->dtype};
  CHECK(check_box3(x, &dst, counts));
  CHECK(check_box3(x, &lhs, counts));
  CHECK(check_box3(x, &rhs, counts));
  unsigned elem = DTYPE_BYTES[in->dtype];
  union { float f[CHUNK]; int32_t i[CHUNK]; } l, r, d;
  for (size_t i0 = 0; i0 < counts[0]; i0++) {
    for (size_t i1 = 0; i1 < counts[1]; i1++) {
      uint8_t* dp = box3_row(x, &dst, i0, i1);
      const uint8_t* lp = box3_row(x, &lhs, i0, i1);
      const uint8_t* rp = box3_row(x, &rhs, i0, i1);
      for (size_t j = 0; j < counts[2]; j += CHUNK) {
        size_t len = counts[2] - j < CHUNK ? counts[2] - j : CHUNK;
        size_t dof = j * dst.strides[2] * elem, lof = j * lhs.strides[2] * elem,
               rof = j * rhs.strides[2] * elem;
        if (in->dtype == DT_I32) {
          load_i32(DT_I32, lp + lof, lhs.strides[2], len, l.i);
          load_i32(DT_I32, rp + rof, rhs.strides[2], len, r.i);
          binary_i32(in->opcode, d.i, l.i, r.i, len);
          store_i32(dp + dof, dst.strides[2], len, d.i);
        } else {
          load_f32(in->dtype, lp + lof, lhs.strides[2], len, l.f);
          load_f32(in->dtype, rp + rof, rhs.strides[2], len, r.f);
          if (in->opcode == OP_VFMA) load_f32(in->dtype, dp + dof, dst.strides[2], len, d.f);
          binary_f32(in->opcode, d.f, l.f, r.f, len);
          store_f32(in->dtype, dp + dof, dst.strides[2], len, d.f);
        }
        if (stopping_elements(len)) return NPU_STATUS_OK;
      }
    }
  }
  return NPU_STATUS_OK;
}

/* The exponential unit: range reduction to x = n·ln2 + r (n = floor(x·log2e + 1/2) in
 * [-127, 127], r by two fused steps), a degree-7 polynomial for e^r - 1 in fused
 * multiply-adds, and 2^n from its exponent bits: the algorithm and constants of MLIR's
 * polynomial approximation, which IREE's CPU code generator emits for math.exp, step for
 * step, so that npu-sim's exp has the bits of stock llvm-cpu's. Returns e^r (before the
 * scaling) and sets *scale = 2^n; exp(x) = e^r · 2^n. */
__attribute__((optimize("fp-contract=off")))
static float exp_parts(float x, float* scale) {
  float c = NPU_MIN(NPU_MAX(x, -87.8f), 88.8f);
  float k = floorf(fmaf(c, bits_f32(0x3FB8AA3Bu), 0.5f));
  k = NPU_MIN(NPU_MAX(k, -127.0f), 127.0f);
  float r = fmaf(bits_f32(0xBF318000u), k, c);
  r = fmaf(bits_f32(0x395E8083u), k, r);
  float p = fmaf(r, bits_f32(0x39506967u), bits_f32(0x3AB743CEu));
  p = fmaf(p, r, bits_f32(0x3C088908u));
  p = fmaf(p, r, bits_f32(0x3D2AA9C1u));
  p = fmaf(p, r, bits_f32(0x3E2AAAAAu));
  p = fmaf(p, r, 0.5f);
  float r2 = r * r;
  *scale = bits_f32((uint32_t)((int32_t)k + 127) << 23);
  return fmaf(p, r2, r) + 1.0f;
}

__attribute__((optimize("fp-contract=off")))
static float npu_exp(float x) {
  float scale, e = exp_parts(x, &scale);
  return e * scale;
}

/* 1 / (1 + exp(-x)): the scaling and the + 1 fuse into one multiply-add, as LLVM
 * contracts them in stock's code. */
__attribute__((optimize("fp-contract=off")))
static float npu_sigmoid(float x) {
  float scale, e = exp_parts(-x, &scale);
  return 1.0f / fmaf(e, scale, 1.0f);
}

/* vround's rounding (isa.Flag.ROUND_*): to nearest with ties to even by default. */
static float round_by(unsigned flags, float x) {
  if (flags & FLAG_ROUND_FLOOR) return floorf(x);
  if (flags & FLAG_ROUND_CEIL) return ceilf(x);
  if (flags & FLAG_ROUND_HALF_AWAY) return roundf(x);
  return nearbyintf(x);
}

static void unary_f32(int op, unsigned flags, float p0, float p1, float* restrict v,
                      size_t n) {
  switch (op) {
    case OP_VRELU: for (size_t i = 0; i < n; i++) v[i] = NPU_MAX(v[i], 0.0f); break;
    case OP_VCLAMP:
      for (size_t i = 0; i < n; i++) {
        float t = NPU_MAX(v[i], p0);
        v[i] = NPU_MIN(t, p1);
      }
      break;
    case OP_VLEAKYRELU: for (size_t i = 0; i < n; i++) v[i] = v[i] < 0 ? p0 * v[i] : v[i]; break;
    case OP_VSIGMOID: for (size_t i = 0; i < n; i++) v[i] = npu_sigmoid(v[i]); break;
    case OP_VTANH: for (size_t i = 0; i < n; i++) v[i] = tanhf(v[i]); break;
    case OP_VEXP: for (size_t i = 0; i < n; i++) v[i] = npu_exp(v[i]); break;
    case OP_VSQRT: for (size_t i = 0; i < n; i++) v[i] = sqrtf(v[i]); break;
    /* two f32 roundings, the square root then the division: 1 / sqrt(x) in f32 */
    case OP_VRSQRT: for (size_t i = 0; i < n; i++) v[i] = 1.0f / sqrtf(v[i]); break;
    /* rounded as the flags say (default: to nearest, ties to even); then vclamp's */
    case OP_VROUND:
      for (size_t i = 0; i < n; i++) {
        float t = NPU_MAX(round_by(flags, v[i]), p0);
        v[i] = NPU_MIN(t, p1);
      }
      break;
    default: for (size_t i = 0; i < n; i++) v[i] = v[i] * p0 + p1; break;   /* vscale */
  }
}

static int exec_unary(exec_t* x, const instr_t* in) {
  const uint32_t* a = in->a;
  const uint32_t* counts = a + UNARY_N0;
  box3_t dst = {"dst", a[UNARY_DST], a + UNARY_DST_S0, in->dtype};
  box3_t src = {"src", a[UNARY_SRC], a + UNARY_SRC_S0, in->dtype};
  CHECK(check_box3(x, &dst, counts));
  CHECK(check_box3(x, &src, counts));
  unsigned elem = DTYPE_BYTES[in->dtype];
  float p0 = bits_f32(a[UNARY_P0]), p1 = bits_f32(a[UNARY_P1]);
  union { float f[CHUNK]; int32_t i[CHUNK]; } v;
  for (size_t i0 = 0; i0 < counts[0]; i0++) {
    for (size_t i1 = 0; i1 < counts[1]; i1++) {
      uint8_t* dp = box3_row(x, &dst, i0, i1);
      const uint8_t* sp = box3_row(x, &src, i0, i1);
      if (in->opcode == OP_VCOPY) {
        if (!copy_run_polled(dp, dst.strides[2], sp, src.strides[2], counts[2], elem)) {
          return NPU_STATUS_OK;
        }
        continue;
      }
      for (size_t j = 0; j < counts[2]; j += CHUNK) {
        size_t len = counts[2] - j < CHUNK ? counts[2] - j : CHUNK;
        uint8_t* d = dp + j * dst.strides[2] * elem;
        const uint8_t* s = sp + j * src.strides[2] * elem;
        if (in->dtype == DT_I32) {   /* vrelu */
          load_i32(DT_I32, s, src.strides[2], len, v.i);
          for (size_t i = 0; i < len; i++) v.i[i] = v.i[i] > 0 ? v.i[i] : 0;
          store_i32(d, dst.strides[2], len, v.i);
        } else {
          load_f32(in->dtype, s, src.strides[2], len, v.f);
          unary_f32(in->opcode, in->flags, p0, p1, v.f, len);
          store_f32(in->dtype, d, dst.strides[2], len, v.f);
        }
        if (stopping_elements(len)) return NPU_STATUS_OK;
      }
    }
  }
  return NPU_STATUS_OK;
}

/* vcvt: v = x * scale (scale 0 means 1) in double; floats round to f32 (exactly the
 * f32 product for float sources) then to the destination; integers round half to
 * even (toward zero with FLAG_TRUNCATE) and saturate (NaN becomes 0). */
static void cvt_load(int dtype, const uint8_t* base, size_t stride, size_t n,
                     double scale, double* restrict out) {
  switch (dtype) {
    case DT_I8: {
      const int8_t* s = (const int8_t*)base;
      for (size_t i = 0; i < n; i++) out[i] = s[i * stride] * scale;
      break;
    }
    case DT_U8: {
      for (size_t i = 0; i < n; i++) out[i] = base[i * stride] * scale;
      break;
    }
    case DT_I32: {
      const int32_t* s = (const int32_t*)base;
      for (size_t i = 0; i < n; i++) out[i] = s[i * stride] * scale;
      break;
    }
    default: {
      float f[CHUNK];
      load_f32(dtype, base, stride, n, f);
      for (size_t i = 0; i < n; i++) out[i] = (double)f[i] * scale;
      break;
    }
  }
}

static double cvt_round(double v, bool truncate) {
  return v != v ? 0.0 : truncate ? trunc(v) : rint(v);
}

static void cvt_store(int dtype, uint8_t* base, size_t stride, size_t n,
                      const double* restrict in, bool truncate) {
  switch (dtype) {
    case DT_I8: {
      int8_t* d = (int8_t*)base;
      for (size_t i = 0; i < n; i++) {
        double v = cvt_round(in[i], truncate);
        d[i * stride] = (int8_t)(v < -128.0 ? -128.0 : v > 127.0 ? 127.0 : v);
      }
      break;
    }
    case DT_U8: {
      for (size_t i = 0; i < n; i++) {
        double v = cvt_round(in[i], truncate);
        base[i * stride] = (uint8_t)(v < 0.0 ? 0.0 : v > 255.0 ? 255.0 : v);
      }
      break;
    }
    case DT_I32: {
      int32_t* d = (int32_t*)base;
      for (size_t i = 0; i < n; i++) {
        double v = cvt_round(in[i], truncate);
        d[i * stride] = (int32_t)(v < -2147483648.0 ? -2147483648.0
                                  : v > 2147483647.0 ? 2147483647.0 : v);
      }
      break;
    }
    default: {
      float f[CHUNK];
      for (size_t i = 0; i < n; i++) f[i] = (float)in[i];
      store_f32(dtype, base, stride, n, f);
      break;
    }
  }
}

static int exec_vcvt(exec_t* x, const instr_t* in) {
  const uint32_t* a = in->a;
  const uint32_t* counts = a + VCVT_N0;
  box3_t dst = {"dst", a[VCVT_DST], a + VCVT_DST_S0, in->dtype};
  box3_t src = {"src", a[VCVT_SRC], a + VCVT_SRC_S0, (int)a[VCVT_SRC_DTYPE]};
  CHECK(check_box3(x, &dst, counts));
  CHECK(check_box3(x, &src, counts));
  double scale = a[VCVT_SCALE] ? (double)bits_f32(a[VCVT_SCALE]) : 1.0;
  unsigned delem = DTYPE_BYTES[dst.dtype], selem = DTYPE_BYTES[src.dtype];
  double v[CHUNK];
  for (size_t i0 = 0; i0 < counts[0]; i0++) {
    for (size_t i1 = 0; i1 < counts[1]; i1++) {
      uint8_t* dp = box3_row(x, &dst, i0, i1);
      const uint8_t* sp = box3_row(x, &src, i0, i1);
      for (size_t j = 0; j < counts[2]; j += CHUNK) {
        size_t len = counts[2] - j < CHUNK ? counts[2] - j : CHUNK;
        cvt_load(src.dtype, sp + j * src.strides[2] * selem, src.strides[2], len, scale, v);
        cvt_store(dst.dtype, dp + j * dst.strides[2] * delem, dst.strides[2], len, v,
                  in->flags & FLAG_TRUNCATE);
        if (stopping_elements(len)) return NPU_STATUS_OK;
      }
    }
  }
  return NPU_STATUS_OK;
}

/* Window taps k in [0, taps) with pad_begin <= o*stride + k*dilation < pad_begin + valid. */
static uint32_t valid_taps(size_t o, uint32_t stride, uint32_t taps, uint32_t dilation,
                           uint32_t pad_begin, uint32_t valid) {
  uint32_t count = 0;
  for (uint32_t k = 0; k < taps; k++) {
    size_t pos = o * stride + (size_t)k * dilation;
    count += pos >= pad_begin && pos < (size_t)pad_begin + valid;
  }
  return count;
}

static int exec_vpool(exec_t* x, const instr_t* in) {
  const uint32_t* a = in->a;
  int dt = in->dtype;
  unsigned elem = DTYPE_BYTES[dt];
  uint32_t c = a[VPOOL_C], hi = a[VPOOL_HI], wi = a[VPOOL_WI];
  uint32_t ho = a[VPOOL_HO], wo = a[VPOOL_WO];
  uint32_t kh = lo16(a[VPOOL_KH_KW]), kw = hi16(a[VPOOL_KH_KW]);
  uint32_t sh = lo16(a[VPOOL_SH_SW]), sw = hi16(a[VPOOL_SH_SW]);
  uint32_t dh = lo16(a[VPOOL_DH_DW]), dw = hi16(a[VPOOL_DH_DW]);
  uint32_t pt = lo16(a[VPOOL_PT_PL]), pl = hi16(a[VPOOL_PT_PL]);
  uint32_t vh = lo16(a[VPOOL_VH_VW]), vw = hi16(a[VPOOL_VH_VW]);
  uint32_t src_addr = a[VPOOL_SRC], dst_addr = a[VPOOL_DST];
  bool avg = in->flags & FLAG_POOL_AVG, include_pad = in->flags & FLAG_COUNT_INCLUDE_PAD;
  CHECK(check_sram(x, "src", src_addr, (u128)c * hi * wi * elem, elem));
  CHECK(check_sram(x, "dst", dst_addr, (u128)c * ho * wo * elem, elem));

  size_t plane = (size_t)hi * wi;
  float* sp = scratch(x, SCRATCH_A, (u128)plane * 4);
  float* acc = scratch(x, SCRATCH_B, (u128)wo * 4);
  float* col_count = scratch(x, SCRATCH_C, (u128)wo * 4);
  if (!sp || !acc || !col_count) return out_of_memory(x, (u128)plane * 4);
  for (size_t xo = 0; xo < wo; xo++) {
    col_count[xo] = include_pad ? (float)kw : (float)valid_taps(xo, sw, kw, dw, pl, vw);
  }
  uint8_t* sram = x->core->sram;
  for (size_t ch = 0; ch < c; ch++) {
    load_f32(dt, sram + src_addr + ch * plane * elem, 1, plane, sp);
    for (size_t y = 0; y < ho; y++) {
      float init = avg ? 0.0f : -INFINITY;
      for (size_t xo = 0; xo < wo; xo++) acc[xo] = init;
      for (size_t ky = 0; ky < kh; ky++) {
        const float* row = sp + (y * sh + ky * dh) * wi;
        for (size_t kx = 0; kx < kw; kx++) {
          const float* r = row + kx * dw;
          if (avg) {
            for (size_t xo = 0; xo < wo; xo++) acc[xo] += r[xo * sw];
          } else {
            for (size_t xo = 0; xo < wo; xo++) acc[xo] = NPU_MAX(acc[xo], r[xo * sw]);
          }
        }
      }
      if (avg) {
        float rows = include_pad ? (float)kh : (float)valid_taps(y, sh, kh, dh, pt, vh);
        for (size_t xo = 0; xo < wo; xo++) {
          float count = rows * col_count[xo];
          acc[xo] = count > 0 ? acc[xo] / count : 0.0f;
        }
      }
      store_f32(dt, sram + dst_addr + (ch * ho + y) * wo * elem, 1, wo, acc);
      if (stopping_elements((size_t)wo * kh * kw)) return NPU_STATUS_OK;
    }
  }
  return NPU_STATUS_OK;
}

#define REDUCE_LANES 16

static int exec_vreduce(exec_t* x, const instr_t* in) {
  const uint32_t* a = in->a;
  int dt = in->dtype;
  unsigned elem = DTYPE_BYTES[dt];
  uint32_t outer = a[VREDUCE_OUTER], inner = a[VREDUCE_INNER];
  uint32_t src_addr = a[VREDUCE_SRC], dst_addr = a[VREDUCE_DST];
  bool max = in->flags & FLAG_REDUCE_MAX, mean = in->flags & FLAG_REDUCE_MEAN;
  CHECK(check_sram(x, "src", src_addr, (u128)outer * inner * elem, elem));
  CHECK(check_sram(x, "dst", dst_addr, (u128)outer * elem, elem));
  uint8_t* sram = x->core->sram;
  float v[CHUNK];
  for (size_t o = 0; o < outer; o++) {
    const uint8_t* row = sram + src_addr + o * inner * elem;
    float lanes[REDUCE_LANES];
    for (int l = 0; l < REDUCE_LANES; l++) lanes[l] = max ? -INFINITY : 0.0f;
    for (size_t j = 0; j < inner; j += CHUNK) {
      size_t len = inner - j < CHUNK ? inner - j : CHUNK;
      load_f32(dt, row + j * elem, 1, len, v);
      size_t padded = (len + REDUCE_LANES - 1) / REDUCE_LANES * REDUCE_LANES;
      for (size_t i = len; i < padded; i++) v[i] = max ? -INFINITY : 0.0f;
      for (size_t i = 0; i < padded; i += REDUCE_LANES) {
        for (int l = 0; l < REDUCE_LANES; l++) {
          lanes[l] = max ? NPU_MAX(lanes[l], v[i + l]) : lanes[l] + v[i + l];
        }
      }
    }
    float result = lanes[0];
    for (int l = 1; l < REDUCE_LANES; l++) {
      result = max ? NPU_MAX(result, lanes[l]) : result + lanes[l];
    }
    if (mean) result /= (float)inner;
    store_f32(dt, sram + dst_addr + o * elem, 1, 1, &result);
    if (stopping_elements(inner)) return NPU_STATUS_OK;
  }
  return NPU_STATUS_OK;
}

static int execute_instruction(exec_t* x, const instr_t* in) {
  switch (in->opcode) {
    case OP_DMA_LOAD: return exec_dma(x, in, false);
    case OP_DMA_STORE: return exec_dma(x, in, true);
    case OP_FILL: return exec_fill(x, in);
    case OP_MATMUL: return exec_matmul(x, in);
    case OP_CONV2D: case OP_DWCONV2D: return exec_conv2d(x, in);
    case OP_VCOPY: case OP_VRELU: case OP_VCLAMP: case OP_VLEAKYRELU: case OP_VSIGMOID:
    case OP_VTANH: case OP_VEXP: case OP_VSCALE: case OP_VSQRT: case OP_VRSQRT: case OP_VROUND:
      return exec_unary(x, in);
    case OP_VCVT: return exec_vcvt(x, in);
    case OP_VPOOL: return exec_vpool(x, in);
    case OP_VREDUCE: return exec_vreduce(x, in);
    default: return exec_binary(x, in);
  }
}

/* ---- cycle model (executable_format/cost.py) ------------------------------ */

static uint64_t ceil_div(uint64_t a, uint64_t b) { return a / b + (a % b != 0); }

static uint64_t k_lanes(const npu_machine_config_t* m, int dtype) {
  if (dtype == DT_F32) {
    uint64_t lanes = m->mac_rows / m->f32_rate_divisor;
    return lanes ? lanes : 1;
  }
  if (is_byte_int(dtype)) return m->mac_rows * m->i8_rate_multiplier;
  return m->mac_rows;
}

static uint64_t vector_cycles(const npu_machine_config_t* m, uint64_t elements, unsigned elem,
                              uint64_t factor) {
  return m->vector_latency_cycles + ceil_div(elements * elem, m->vector_bytes_per_cycle) * factor;
}

static uint64_t instruction_cycles(const npu_machine_config_t* m, const instr_t* in) {
  const uint32_t* a = in->a;
  uint64_t elem = DTYPE_BYTES[in->dtype];
  switch (in->opcode) {
    case OP_DMA_LOAD:
    case OP_DMA_STORE: {
      bool contiguous = a[DMA_DRAM_S3] == 1;
      uint64_t run_bytes = contiguous ? (uint64_t)a[DMA_N3] * elem : elem;
      uint64_t runs = (uint64_t)a[DMA_N0] * a[DMA_N1] * a[DMA_N2] * (contiguous ? 1 : a[DMA_N3]);
      uint64_t moved = runs * ceil_div(run_bytes, m->dma_burst_bytes) * m->dma_burst_bytes;
      return m->dma_latency_cycles + ceil_div(moved, m->dram_bytes_per_cycle);
    }
    case OP_FILL:
      return 1 + ceil_div((uint64_t)a[FILL_N0] * a[FILL_N1] * a[FILL_N2] * a[FILL_N3] * elem,
                          m->sram_bytes_per_cycle);
    case OP_MATMUL:
      return m->mac_latency_cycles + (uint64_t)a[MATMUL_M] * ceil_div(a[MATMUL_N], m->mac_cols) *
                                         ceil_div(a[MATMUL_K], k_lanes(m, in->dtype));
    case OP_CONV2D: {
      uint64_t groups = a[CONV2D_GROUPS];
      uint64_t kgroup = (uint64_t)(a[CONV2D_C] / a[CONV2D_GROUPS]) * lo16(a[CONV2D_KH_KW]) *
                        hi16(a[CONV2D_KH_KW]);
      return m->mac_latency_cycles + groups * a[CONV2D_HO] * a[CONV2D_WO] *
                                         ceil_div(a[CONV2D_F] / a[CONV2D_GROUPS], m->mac_cols) *
                                         ceil_div(kgroup, k_lanes(m, in->dtype));
    }
    case OP_DWCONV2D:
      return m->mac_latency_cycles +
             (uint64_t)a[DWCONV2D_C] *
                 ceil_div((uint64_t)a[DWCONV2D_HO] * a[DWCONV2D_WO], m->mac_cols) *
                 ceil_div((uint64_t)lo16(a[DWCONV2D_KH_KW]) * hi16(a[DWCONV2D_KH_KW]),
                          k_lanes(m, in->dtype));
    case OP_VPOOL:
      return vector_cycles(m, (uint64_t)a[VPOOL_C] * a[VPOOL_HO] * a[VPOOL_WO] *
                                  lo16(a[VPOOL_KH_KW]) * hi16(a[VPOOL_KH_KW]), elem, 1);
    case OP_VREDUCE:
      return vector_cycles(m, (uint64_t)a[VREDUCE_OUTER] * a[VREDUCE_INNER], elem, 1);
    case OP_VCVT: {
      unsigned src = DTYPE_BYTES[a[VCVT_SRC_DTYPE]];
      return vector_cycles(m, (uint64_t)a[VCVT_N0] * a[VCVT_N1] * a[VCVT_N2],
                           elem > src ? elem : src, 1);
    }
    default: {   /* binary and unary vector ops */
      const op_info_t* op = &OPS[in->opcode];
      int n0 = vector_n0_field(op->layout);
      return vector_cycles(m, (uint64_t)a[n0] * a[n0 + 1] * a[n0 + 2], elem,
                           op->transcendental ? m->transcendental_factor : 1);
    }
  }
}

static uint64_t instruction_macs(const instr_t* in) {
  const uint32_t* a = in->a;
  if (in->opcode == OP_MATMUL) return (uint64_t)a[MATMUL_M] * a[MATMUL_N] * a[MATMUL_K];
  if (in->opcode == OP_CONV2D || in->opcode == OP_DWCONV2D) {
    conv_args_t p = conv_args(in);
    return (uint64_t)p.ho * p.wo * p.f * (p.c / p.groups) * p.kh * p.kw;
  }
  return 0;
}

typedef struct timeline_t {
  uint64_t free_at[NPU_ENGINE_COUNT];
} timeline_t;

/* Advances the timeline over signal/wait/barrier; the pre-pass has checked the
 * semaphore rules and reserved room for every signal. */
static void control_instruction(exec_t* x, timeline_t* t, const instr_t* in) {
  npu_stats_t* st = x->stats;
  switch (in->opcode) {
    case OP_SIGNAL: {
      semaphore_t* s = &x->core->semaphores[in->a[SIGNAL_SEM]];
      s->times[s->count++] = t->free_at[in->a[SIGNAL_ENGINE]];
      return;
    }
    case OP_WAIT: {
      uint32_t engine = in->a[WAIT_ENGINE], value = in->a[WAIT_VALUE];
      if (value == 0) return;
      uint64_t ready = x->core->semaphores[in->a[WAIT_SEM]].times[value - 1];
      if (ready > t->free_at[engine]) {
        st->stall_cycles[engine] += ready - t->free_at[engine];
        t->free_at[engine] = ready;
      }
      return;
    }
    default: {   /* barrier */
      uint64_t latest = 0;
      for (int e = 0; e < NPU_ENGINE_COUNT; e++) {
        if (t->free_at[e] > latest) latest = t->free_at[e];
      }
      for (int e = 0; e < NPU_ENGINE_COUNT; e++) {
        st->stall_cycles[e] += latest - t->free_at[e];
        t->free_at[e] = latest;
      }
      return;
    }
  }
}

static void account(exec_t* x, timeline_t* t, const instr_t* in, npu_trace_event_t* trace,
                    size_t trace_capacity) {
  npu_stats_t* st = x->stats;
  const npu_machine_config_t* m = &x->core->config;
  int engine = x->op->engine;
  uint64_t cycles = instruction_cycles(m, in);
  uint64_t start = t->free_at[engine];
  t->free_at[engine] = start + cycles;
  st->busy_cycles[engine] += cycles;
  st->macs += instruction_macs(in);
  if (in->opcode == OP_DMA_LOAD || in->opcode == OP_DMA_STORE) {
    const uint32_t* a = in->a;
    uint64_t elements = (uint64_t)a[DMA_N0] * a[DMA_N1] * a[DMA_N2] * a[DMA_N3];
    uint64_t moved = elements * DTYPE_BYTES[in->dtype];
    if (in->opcode == OP_DMA_LOAD) {
      st->dram_read_bytes += moved;
    } else {
      st->dram_write_bytes += moved;
    }
  }
  if (trace && st->trace_count < trace_capacity) {
    npu_trace_event_t* ev = &trace[st->trace_count];
    ev->start = start;
    ev->end = start + cycles;
    ev->engine = (uint32_t)engine;
    ev->opcode = in->opcode;
    ev->index = (uint32_t)x->index;
  }
  st->trace_count++;
}

/* ---- entry point ------------------------------------------------------------ */

/* Work charged to stopping() per instruction, besides what its loops report: a program
 * of many small instructions still reads the clock every STOP_CHECK_WORK /
 * INSTRUCTION_WORK instructions. */
#define INSTRUCTION_WORK ((uint64_t)4096)

/* The failure of a run stopped by its control, at instruction x->index: "stopped at
 * instruction 12 (conv2d) after 100.2 ms" (the deadline's caller names the deadline),
 * "cancelled: ..." or "interrupted by SIGINT: ...". */
static int stopped(exec_t* x, const control_t* c, int why) {
  double ms = (double)(now_ns() - c->start_ns) / 1e6;
  const char* reason = why == NPU_STATUS_DEADLINE_EXCEEDED ? ""
                       : atomic_load(c->cancels) != c->cancels_at_start ? "cancelled: "
                                                                        : "interrupted by SIGINT: ";
  snprintf(x->error, x->error_capacity, "%sstopped at instruction %zu (%s) after %.1f ms",
           reason, x->index, x->op ? x->op->name : "?", ms);
  return why;
}

int npu_core_execute(npu_core_t* core, const uint8_t* program, size_t program_bytes,
                     const npu_binding_t* bindings, size_t binding_count,
                     const uint8_t* const_pool, size_t const_pool_bytes,
                     const uint32_t* constants, size_t constant_count,
                     const npu_run_limits_t* limits, npu_stats_t* stats,
                     npu_trace_event_t* trace, size_t trace_capacity, char* error,
                     size_t error_capacity) {
  control_t control = {.start_ns = now_ns(), .deadline_ns = UINT64_MAX,
                       .cancels = &core->cancels,
                       .cancels_at_start = atomic_load(&core->cancels)};
  atomic_init(&control.stop, NPU_STATUS_OK);
  if (limits && limits->timeout_ns) {
    control.timeout_ns = limits->timeout_ns;
    if (__builtin_add_overflow(control.start_ns, limits->timeout_ns, &control.deadline_ns)) {
      control.deadline_ns = UINT64_MAX;      /* beyond the clock's range: none */
    }
  }
  memset(stats, 0, sizeof(*stats));
  if (error && error_capacity) error[0] = 0;
  exec_t x = {core, bindings, binding_count, const_pool, const_pool_bytes, stats,
              error, error_capacity, 0, NULL, NULL, constants, constant_count};
  if (program_bytes == 0 || program_bytes % NPU_INSTRUCTION_BYTES) {
    snprintf(error, error_capacity, "program size %zu is not a positive multiple of %d bytes",
             program_bytes, NPU_INSTRUCTION_BYTES);
    return NPU_STATUS_INVALID_ARGUMENT;
  }
  size_t count = program_bytes / NPU_INSTRUCTION_BYTES;
  size_t end = count;
  bool heavy = false;
  for (uint64_t s = 0; s < core->config.semaphores; s++) {
    core->semaphores[s].count = 0;
    core->semaphores[s].engine = -1;
  }
  for (size_t i = 0; i < count && end == count; i++) {
    instr_t in = decode(program + i * NPU_INSTRUCTION_BYTES);
    x.index = i;
    x.op = NULL;
    CHECK(check_encoding(&x, &in));
    CHECK(check_work(&x, &in));
    if (in.opcode == OP_SIGNAL || in.opcode == OP_WAIT) CHECK(check_semaphore(&x, &in));
    if (in.opcode == OP_END) end = i;
    if (instruction_macs(&in) >= 2 * MACS_PER_WORKER) heavy = true;
  }
  if (end == count) {
    snprintf(error, error_capacity, "program has no end instruction");
    return NPU_STATUS_INVALID_ARGUMENT;
  }
  x.op = NULL;
  CHECK(reserve_signals(&x));
  pool_t pool;
  if (heavy && core->threads > 1) {
    pool_start(&pool, core->threads);
    x.pool = &pool;
  }
  timeline_t t = {{0}};
  int status = NPU_STATUS_OK;
  if (limits && limits->stop_on_sigint) {
    control.watch_sigint = sigint_watch(&control.sigints_at_start);
  }
  t_control = &control;
  t_work = 0;
  for (size_t i = 0; i < end && status == NPU_STATUS_OK; i++) {
    instr_t in = decode(program + i * NPU_INSTRUCTION_BYTES);
    x.index = i;
    x.op = &OPS[in.opcode];
    if (stopping(INSTRUCTION_WORK)) {
      status = stopped(&x, &control, atomic_load(&control.stop));
      break;
    }
    if (x.op->engine == ENGINE_CONTROL) {
      control_instruction(&x, &t, &in);
    } else {
      status = execute_instruction(&x, &in);
      int why = atomic_load(&control.stop);
      if (status == NPU_STATUS_OK && why != NPU_STATUS_OK) status = stopped(&x, &control, why);
      if (status == NPU_STATUS_OK) account(&x, &t, &in, trace, trace_capacity);
    }
    if (status == NPU_STATUS_OK) stats->instructions++;
  }
  t_control = NULL;
  if (x.pool) pool_stop(x.pool);
  for (int e = 0; e < NPU_ENGINE_COUNT; e++) {
    if (t.free_at[e] > stats->total_cycles) stats->total_cycles = t.free_at[e];
  }
  return status;
}
