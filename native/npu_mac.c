/* The MAC array's instructions: matmul, conv2d and dwconv2d. Operands are packed into
 * f32/i32 and multiplied by one register-tiled GEMM kernel, here in the same translation
 * unit so that it is inlined into its callers; conv2d is an implicit im2col over chunks
 * of output rows (dwconv2d: the conv2d with f = groups = c). Large instructions are split
 * over the worker threads (npu_threads.h) by blocks of output rows and columns, or by
 * chunks of output rows (conv2d), which leaves every output element's summation order,
 * and so its bits, as on one thread. */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "npu_elements.h"
#include "npu_kernels.h"
#include "npu_ranges.h"
#include "npu_stop.h"
#include "npu_threads.h"

/* ---- GEMM kernel: C[m][n] += A[m][k] * B[k][n] (row-major, leading dims) --
 * Every element of C adds its products in k order, each with one rounding (a fused
 * multiply-add, c = a[i][kk] * b[kk][j] + c, for kk = 0, 1, ...): the MAC array's
 * columns pass each partial sum from one reduction lane to the next, and a sequential
 * f32 loop such as stock IREE's CPU code computes the same bits. An element's value
 * depends only on its row of A and column of B, so every tiling and every split of C
 * over threads gives the same bits.
 *
 * C is computed in tiles of up to GEMM_MR rows by GEMM_NR columns (two vectors), held in
 * registers across blocks of GEMM_KB of k: 2 x GEMM_MR independent sums in flight, enough
 * to keep the FMA units busy although each sum is a chain. The vectors are as wide as
 * the target's own (GCC's __BIGGEST_ALIGNMENT__: 16 bytes for SSE2 or NEON, 32 for AVX2,
 * 64 for AVX-512); a tile needs 2 x GEMM_MR + 3 of them, within the 16 registers of SSE2
 * and AVX2 (a vector wider than the target's is split by GCC through the stack: the
 * 64-byte vectors this kernel had ran at 2.3 GFLOP/s in an AVX2 build, see
 * docs/performance.md).
 *
 * The loops around the tiles are blocked for the caches, so that A and B are read from
 * memory about once however large C is: blocks of GEMM_NC columns, then GEMM_KB of k,
 * then GEMM_MC rows; within one, panels of GEMM_NR columns, then tiles of rows. The
 * block's B rows (GEMM_KB x GEMM_NC) are first copied, read along B's rows, into dense
 * panels in the worker's pack buffer (128 KB: stays in L2), so a tile reads its panel
 * (16-32 KB) from L1 whatever B's row stride; the GEMM_MC rows of A by GEMM_KB (about
 * 100 KB, read in place) stay in L2 while every panel of the block passes over them. B is
 * read in place instead when one tile reads it (m <= GEMM_MR) or when a block of its
 * rows spans at most GEMM_B_IN_PLACE bytes (a small B stays in cache anyway; repacking
 * it per unit cost more than it saved). The blocks' sizes are bytes of cache, the same
 * for every vector width. A split over threads (gemm_split) gives each worker units of
 * about GEMM_MC rows by GEMM_NC columns, each with its own packed B: before, units were
 * whole columns of C, and each streamed all of A (1 MiB for 512^3, more than L2) once per
 * panel. A panel of GEMM_LANES columns or fewer at the right edge of C runs tiles of one
 * vector; other tiles cut by the edge run on a copy; B is read GEMM_NR columns at a
 * time, so a B operand read in place needs GEMM_NR elements of readable slack past its
 * end (their lanes are computed and dropped). */
#if defined(__BIGGEST_ALIGNMENT__) && __BIGGEST_ALIGNMENT__ >= 64
#define GEMM_LANES 16
#elif defined(__BIGGEST_ALIGNMENT__) && __BIGGEST_ALIGNMENT__ >= 32
#define GEMM_LANES 8
#else
#define GEMM_LANES 4
#endif
#define GEMM_MR 6
#define GEMM_NR (2 * GEMM_LANES)
#define GEMM_KB 256
#define GEMM_MC 96
#define GEMM_NC 128
#define GEMM_PACK_ELEMS (GEMM_KB * GEMM_NC)
#define GEMM_B_IN_PLACE (64 * 1024)
_Static_assert(GEMM_MC % GEMM_MR == 0 && GEMM_NC % GEMM_NR == 0, "whole tiles and panels");
/* A GEMM polls stopping() once per panel of columns when m * k is at least this (a
 * smaller one is at most a few milliseconds of work in all, polled by its caller). */
#define GEMM_POLL_MK 4096

typedef float gemm_f32_vec __attribute__((vector_size(GEMM_LANES * 4), aligned(4)));
typedef int32_t gemm_i32_vec __attribute__((vector_size(GEMM_LANES * 4), aligned(4)));

/* x rounded to the nearest bf16 (ties to even), as an f32; NaN stays NaN. */
static inline gemm_f32_vec round_bf16(gemm_f32_vec x) {
  gemm_i32_vec bits = (gemm_i32_vec)x, nan = x != x;
  gemm_i32_vec rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) & (int32_t)0xFFFF0000;
  return (gemm_f32_vec)((nan & bits) | (~nan & rounded));
}

/* x rounded to the nearest f16 (ties to even), as an f32: 11 significant bits from 2^-14,
 * multiples of 2^-24 below it (f16 subnormals), infinity from 65520; NaN stays NaN. */
static inline gemm_f32_vec round_f16(gemm_f32_vec x) {
  gemm_i32_vec bits = (gemm_i32_vec)x;
  gemm_i32_vec sign = bits & INT32_MIN, mag = bits & INT32_MAX;
  gemm_i32_vec normal = (mag + 0xFFF + ((mag >> 13) & 1)) & ~0x1FFF;
  gemm_i32_vec subnormal = (gemm_i32_vec)(((gemm_f32_vec)mag + 0.5f) - 0.5f);
  gemm_i32_vec below = mag < 0x38800000, overflow = mag >= 0x477FF000, nan = mag > 0x7F800000;
  gemm_i32_vec r = (below & subnormal) | (~below & normal);
  r = (overflow & 0x7F800000) | (~overflow & r);
  r = (nan & mag) | (~nan & r);
  return (gemm_f32_vec)(r | sign);
}

/* One step of a sum: fused (f32, i32), or with each product and sum rounded to f16 or
 * bf16 (NARROW_SUM: f32 arithmetic on f16 values then one rounding is f16 arithmetic,
 * as 24 >= 2 x 11 + 2 bits; likewise for bf16). */
#define FMA_STEP(acc, x, b) ((acc) += (x) * (b))
#define F16_STEP(acc, x, b) ((acc) = round_f16((acc) + round_f16((x) * (b))))
#define BF16_STEP(acc, x, b) ((acc) = round_bf16((acc) + round_bf16((x) * (b))))

/* NAME(k, a, b, ldb, c, ldc): a tile of ROWS rows (row r of A at a[r]) by GEMM_NR. */
#define DEFINE_GEMM_TILE(NAME, T, V, ROWS, STEP)                                       \
  static void NAME(size_t k, const T* const* a, const T* b, size_t ldb, T* c,          \
                   size_t ldc) {                                                       \
    V acc0[ROWS], acc1[ROWS];                                                          \
    for (int r = 0; r < ROWS; r++) {                                                   \
      acc0[r] = *(const V*)(c + r * ldc);                                              \
      acc1[r] = *(const V*)(c + r * ldc + GEMM_LANES);                                 \
    }                                                                                  \
    for (size_t kk = 0; kk < k; kk++) {                                                \
      V b0 = *(const V*)(b + kk * ldb), b1 = *(const V*)(b + kk * ldb + GEMM_LANES);   \
      for (int r = 0; r < ROWS; r++) {                                                 \
        T x = a[r][kk];                                                                \
        STEP(acc0[r], x, b0);                                                          \
        STEP(acc1[r], x, b1);                                                          \
      }                                                                                \
    }                                                                                  \
    for (int r = 0; r < ROWS; r++) {                                                   \
      *(V*)(c + r * ldc) = acc0[r];                                                    \
      *(V*)(c + r * ldc + GEMM_LANES) = acc1[r];                                       \
    }                                                                                  \
  }

/* NAME(k, a, b, ldb, c, ldc): a tile of ROWS rows by GEMM_LANES (one vector), for a
 * panel of at most GEMM_LANES columns (the right edge of C): the same sums as the
 * first vector of DEFINE_GEMM_TILE's. */
#define DEFINE_GEMM_HALF_TILE(NAME, T, V, ROWS, STEP)                                  \
  static void NAME(size_t k, const T* const* a, const T* b, size_t ldb, T* c,          \
                   size_t ldc) {                                                       \
    V acc0[ROWS];                                                                      \
    for (int r = 0; r < ROWS; r++) acc0[r] = *(const V*)(c + r * ldc);                 \
    for (size_t kk = 0; kk < k; kk++) {                                                \
      V b0 = *(const V*)(b + kk * ldb);                                                \
      for (int r = 0; r < ROWS; r++) STEP(acc0[r], a[r][kk], b0);                      \
    }                                                                                  \
    for (int r = 0; r < ROWS; r++) *(V*)(c + r * ldc) = acc0[r];                       \
  }

/* The tile of ROWS rows by GEMM_NR (PREFIX_tileROWS) and by GEMM_LANES (PREFIX_halfROWS). */
#define DEFINE_GEMM_ROW_TILES(PREFIX, T, V, ROWS, STEP)                                \
  DEFINE_GEMM_TILE(PREFIX##_tile##ROWS, T, V, ROWS, STEP)                              \
  DEFINE_GEMM_HALF_TILE(PREFIX##_half##ROWS, T, V, ROWS, STEP)

/* The tiles of 1..GEMM_MR rows of one element type, indexed by rows - 1: PREFIX_tiles
 * (GEMM_NR columns) and PREFIX_half_tiles (GEMM_LANES). */
#define DEFINE_GEMM_TILES(PREFIX, T, V, STEP)                                          \
  DEFINE_GEMM_ROW_TILES(PREFIX, T, V, 1, STEP)                                         \
  DEFINE_GEMM_ROW_TILES(PREFIX, T, V, 2, STEP)                                         \
  DEFINE_GEMM_ROW_TILES(PREFIX, T, V, 3, STEP)                                         \
  DEFINE_GEMM_ROW_TILES(PREFIX, T, V, 4, STEP)                                         \
  DEFINE_GEMM_ROW_TILES(PREFIX, T, V, 5, STEP)                                         \
  DEFINE_GEMM_ROW_TILES(PREFIX, T, V, 6, STEP)                                         \
  static void (*const PREFIX##_tiles[GEMM_MR])(size_t, const T* const*, const T*,      \
                                               size_t, T*, size_t) = {                 \
      PREFIX##_tile1, PREFIX##_tile2, PREFIX##_tile3,                                  \
      PREFIX##_tile4, PREFIX##_tile5, PREFIX##_tile6};                                 \
  static void (*const PREFIX##_half_tiles[GEMM_MR])(size_t, const T* const*, const T*, \
                                                    size_t, T*, size_t) = {            \
      PREFIX##_half1, PREFIX##_half2, PREFIX##_half3,                                  \
      PREFIX##_half4, PREFIX##_half5, PREFIX##_half6};
_Static_assert(GEMM_MR == 6, "DEFINE_GEMM_TILES defines tiles of 1 to 6 rows");

/* NAME(m, n, k, a, lda, b, ldb, c, ldc, pack): blocks of GEMM_NC columns by GEMM_KB of
 * k by GEMM_MC rows; in each, panels of GEMM_NR columns, tiles of rows. `pack` holds
 * GEMM_PACK_ELEMS elements: the block of B, as dense panels, when more than one tile
 * reads it. */
#define DEFINE_GEMM(NAME, T)                                                           \
  static void NAME##_run_tile(size_t rows, size_t nr, size_t k, const T* const* a,     \
                          const T* b, size_t ldb, T* c, size_t ldc) {                  \
    if (nr == GEMM_NR || nr == GEMM_LANES) {                                           \
      (nr == GEMM_NR ? NAME##_tiles : NAME##_half_tiles)[rows - 1](k, a, b, ldb, c, ldc); \
      return;                                                                          \
    }                                                                                  \
    T edge[GEMM_MR * GEMM_NR] = {0};                                                   \
    for (size_t r = 0; r < rows; r++) memcpy(edge + r * GEMM_NR, c + r * ldc, nr * sizeof(T)); \
    (nr < GEMM_LANES ? NAME##_half_tiles : NAME##_tiles)[rows - 1](k, a, b, ldb, edge, GEMM_NR); \
    for (size_t r = 0; r < rows; r++) memcpy(c + r * ldc, edge + r * GEMM_NR, nr * sizeof(T)); \
  }                                                                                    \
                                                                                       \
  /* kb rows of nc columns of B (row stride ldb) as panels of GEMM_NR columns, panel p \
   * at out + p * kb * GEMM_NR, zeros past nc; B is read along its rows. */           \
  static void NAME##_pack_b(size_t kb, size_t nc, const T* b, size_t ldb, T* out) {    \
    size_t full = nc / GEMM_NR * GEMM_NR, rest = nc - full;                            \
    for (size_t kk = 0; kk < kb; kk++) {                                               \
      const T* row = b + kk * ldb;                                                     \
      T* o = out + kk * GEMM_NR;                                                       \
      for (size_t j = 0; j < full; j += GEMM_NR) memcpy(o + j * kb, row + j, sizeof(T) * GEMM_NR); \
      if (rest) {                                                                      \
        memcpy(o + full * kb, row + full, rest * sizeof(T));                           \
        memset(o + full * kb + rest, 0, (GEMM_NR - rest) * sizeof(T));                 \
      }                                                                                \
    }                                                                                  \
  }                                                                                    \
                                                                                       \
  static void NAME(size_t m, size_t n, size_t k, const T* a, size_t lda, const T* b,   \
                   size_t ldb, T* c, size_t ldc, T* pack) {                            \
    bool poll = m * k >= GEMM_POLL_MK;                                                 \
    bool packed = m > GEMM_MR && (k < GEMM_KB ? k : GEMM_KB) * ldb * sizeof(T) > GEMM_B_IN_PLACE; \
    for (size_t j0 = 0; j0 < n; j0 += GEMM_NC) {                                       \
      size_t nc = n - j0 < GEMM_NC ? n - j0 : GEMM_NC;                                 \
      for (size_t k0 = 0; k0 < k; k0 += GEMM_KB) {                                     \
        size_t kb = k - k0 < GEMM_KB ? k - k0 : GEMM_KB;                               \
        const T* bk = b + k0 * ldb + j0;                                               \
        if (packed) NAME##_pack_b(kb, nc, bk, ldb, pack);                              \
        for (size_t i0 = 0; i0 < m; i0 += GEMM_MC) {                                   \
          size_t mc = m - i0 < GEMM_MC ? m - i0 : GEMM_MC;                             \
          if (poll && stopping((uint64_t)mc * nc * kb)) return;                        \
          for (size_t j = 0; j < nc; j += GEMM_NR) {                                   \
            size_t nr = nc - j < GEMM_NR ? nc - j : GEMM_NR;                           \
            const T* bp = packed ? pack + j * kb : bk + j;                             \
            size_t ldbp = packed ? GEMM_NR : ldb;                                      \
            for (size_t i = i0; i < i0 + mc; i += GEMM_MR) {                           \
              size_t rows = i0 + mc - i < GEMM_MR ? i0 + mc - i : GEMM_MR;             \
              const T* tile_rows[GEMM_MR];                                             \
              for (size_t r = 0; r < rows; r++) tile_rows[r] = a + (i + r) * lda + k0; \
              NAME##_run_tile(rows, nr, kb, tile_rows, bp, ldbp, c + i * ldc + j0 + j, ldc); \
            }                                                                          \
          }                                                                            \
        }                                                                              \
      }                                                                                \
    }                                                                                  \
  }

DEFINE_GEMM_TILES(gemm_f32, float, gemm_f32_vec, FMA_STEP)
DEFINE_GEMM_TILES(gemm_i32, int32_t, gemm_i32_vec, FMA_STEP)
DEFINE_GEMM_TILES(gemm_f16_sum, float, gemm_f32_vec, F16_STEP)
DEFINE_GEMM_TILES(gemm_bf16_sum, float, gemm_f32_vec, BF16_STEP)
DEFINE_GEMM(gemm_f32, float)
DEFINE_GEMM(gemm_i32, int32_t)
DEFINE_GEMM(gemm_f16_sum, float)
DEFINE_GEMM(gemm_bf16_sum, float)

/* ---- matrix-vector kernel: c[j] += sum over kk of a[kk] * b[j * ldb + kk] ----------
 * An f32 matmul with m = 1 and a transposed B (an LSTM step: B's rows, one per output
 * column, are contiguous in k), read in place: the GEMM kernel would first pack B, a
 * transpose that costs several times the products themselves. Each output adds its
 * products in k order with one fused multiply-add each, the GEMM kernel's FMA_STEP (so
 * the same bits on every build). Four rows of B by four of k are loaded as 4-float
 * vectors and transposed in registers (8 two-vector shuffles, single instructions on
 * SSE2, AVX and NEON), so that a vector holds one k of four outputs; MATVEC_GROUPS such
 * groups of four outputs are summed side by side (independent chains, enough for the
 * FMA latency). The k left over (k % 4) and the outputs left over (n % 4) are summed
 * one by one, in the same order. */
#define MATVEC_GROUPS 4
/* worker_count weighs a matrix-vector MAC as this many GEMM MACs: each reads its own 4
 * bytes of B, so an LSTM step's 1x32x512 product (16k MACs, about 3 us) is worth
 * splitting over two spinning threads (16k x 64 = 2 x MACS_PER_WORKER) while a GEMM of
 * that size is not. Measured (docs/performance.md): ddddocr_ocr's core 51 -> 46 ms per
 * call; a lower MACS_PER_WORKER for every MAC instruction instead slowed ppocr_cls by
 * 7%. */
#define MATVEC_MAC_WORK 64

typedef float mv_f32x4 __attribute__((vector_size(16), aligned(4)));
typedef int32_t mv_i32x4 __attribute__((vector_size(16)));

/* FMA_STEP on scalars. GCC may vectorize a scalar loop of `acc += x * b` into separate
 * multiplies and adds (an in-order reduction; contraction comes after vectorization),
 * which rounds twice: where the target has a fused multiply-add (__FP_FAST_FMAF, as the
 * GEMM kernel's FMA_STEP then uses), it is called for explicitly. */
#ifdef __FP_FAST_FMAF
#define SCALAR_FMA_STEP(acc, x, b) ((acc) = __builtin_fmaf((x), (b), (acc)))
#else
#define SCALAR_FMA_STEP(acc, x, b) ((acc) += (x) * (b))
#endif

/* The 4x4 block of floats at src (rows src, src + ld, ...) transposed: lane i of col[j]
 * is src[i * ld + j]. */
static inline void transpose_4x4(const float* src, size_t ld, mv_f32x4 col[4]) {
  mv_f32x4 r0 = *(const mv_f32x4*)src, r1 = *(const mv_f32x4*)(src + ld);
  mv_f32x4 r2 = *(const mv_f32x4*)(src + 2 * ld), r3 = *(const mv_f32x4*)(src + 3 * ld);
  mv_f32x4 t0 = __builtin_shuffle(r0, r1, (mv_i32x4){0, 4, 1, 5});
  mv_f32x4 t1 = __builtin_shuffle(r0, r1, (mv_i32x4){2, 6, 3, 7});
  mv_f32x4 t2 = __builtin_shuffle(r2, r3, (mv_i32x4){0, 4, 1, 5});
  mv_f32x4 t3 = __builtin_shuffle(r2, r3, (mv_i32x4){2, 6, 3, 7});
  col[0] = __builtin_shuffle(t0, t2, (mv_i32x4){0, 1, 4, 5});
  col[1] = __builtin_shuffle(t0, t2, (mv_i32x4){2, 3, 6, 7});
  col[2] = __builtin_shuffle(t1, t3, (mv_i32x4){0, 1, 4, 5});
  col[3] = __builtin_shuffle(t1, t3, (mv_i32x4){2, 3, 6, 7});
}

/* c[j .. j + 4*groups) += the products of k0 .. k0 + 4*blocks - 1, in k order. */
static inline void matvec_rows_groups(size_t groups, size_t blocks, const float* a,
                                      const float* b, size_t ldb, float* c) {
  mv_f32x4 acc[MATVEC_GROUPS];
  for (size_t g = 0; g < groups; g++) acc[g] = *(const mv_f32x4*)(c + 4 * g);
  for (size_t q = 0; q < blocks; q++) {
    const float* aq = a + 4 * q;
    for (size_t g = 0; g < groups; g++) {
      mv_f32x4 kk[4];           /* kk[t]: k0 + 4q + t of the four outputs, by lane */
      transpose_4x4(b + 4 * g * ldb + 4 * q, ldb, kk);
      FMA_STEP(acc[g], aq[0], kk[0]);
      FMA_STEP(acc[g], aq[1], kk[1]);
      FMA_STEP(acc[g], aq[2], kk[2]);
      FMA_STEP(acc[g], aq[3], kk[3]);
    }
  }
  for (size_t g = 0; g < groups; g++) *(mv_f32x4*)(c + 4 * g) = acc[g];
}

static void matvec_rows_f32(size_t n, size_t k, const float* a, const float* b, size_t ldb,
                            float* c) {
  bool poll = k >= GEMM_POLL_MK;
  size_t blocks = k / 4;
  for (size_t j = 0; j < n;) {
    size_t rows = n - j >= 4 * MATVEC_GROUPS ? 4 * MATVEC_GROUPS : n - j >= 4 ? 4 : 1;
    if (poll && stopping((uint64_t)rows * k)) return;
    size_t k_done = 0;                           /* of these rows' sums, done as vectors */
    if (rows >= 4) {           /* constant group counts: the sums stay in registers */
      if (rows == 4 * MATVEC_GROUPS) {
        matvec_rows_groups(MATVEC_GROUPS, blocks, a, b + j * ldb, ldb, c + j);
      } else {
        matvec_rows_groups(1, blocks, a, b + j * ldb, ldb, c + j);
      }
      k_done = 4 * blocks;
    }
    for (size_t r = j; r < j + rows; r++) {      /* the k left over, or a whole output */
      float s = c[r];
      for (size_t kk = k_done; kk < k; kk++) SCALAR_FMA_STEP(s, a[kk], b[r * ldb + kk]);
      c[r] = s;
    }
    j += rows;
  }
}

/* ---- the instructions: operands packed for the kernel, split over workers ------- */

/* Rows of a transposed operand converted per memory run: at most this many at once. */
#define PACK_RUN 64

/* The dtype of a MAC instruction's B operand (matmul) or weights (conv2d, dwconv2d):
 * the instruction's, with MIXED_SIGN the other byte integer, with HALF_B f16 (an f32
 * instruction's fp16-stored weights, widened exactly when packed) (isa.mac_b_dtype). */
static int mac_b_dtype(const instr_t* in) {
  if (in->flags & FLAG_HALF_B) return DT_F16;
  if (!(in->flags & FLAG_MIXED_SIGN)) return in->dtype;
  return in->dtype == DT_I8 ? DT_U8 : DT_I8;
}

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

/* pack_transposed of f32 elements: 4x4 blocks transposed in registers, 16 rows (one
 * 64-byte line of each source column) at a time; the edges element by element. */
static void pack_transposed_f32(const float* base, size_t rows, size_t cols,
                                size_t col_stride, float* out) {
  size_t rows4 = rows & ~(size_t)3, cols4 = cols & ~(size_t)3;
  for (size_t r0 = 0; r0 < rows4; r0 += 16) {
    size_t r1 = r0 + 16 < rows4 ? r0 + 16 : rows4;
    for (size_t c = 0; c < cols4; c += 4) {
      for (size_t r = r0; r < r1; r += 4) {
        mv_f32x4 row[4];        /* row[i]: columns c .. c + 3 of row r + i */
        transpose_4x4(base + c * col_stride + r, col_stride, row);
        for (int i = 0; i < 4; i++) *(mv_f32x4*)(out + (r + i) * cols + c) = row[i];
      }
    }
  }
  for (size_t r = 0; r < rows; r++) {
    for (size_t c = r < rows4 ? cols4 : 0; c < cols; c++) {
      out[r * cols + c] = base[c * col_stride + r];
    }
  }
}

/* Packs a rows x cols matrix (element (r, c) at base + (r*row_stride + c*col_stride))
 * of a MAC operand dtype into dense f32 (floats) or i32 (i8). */
static void pack_matrix(int dtype, const uint8_t* base, size_t rows, size_t cols,
                        size_t row_stride, size_t col_stride, void* out) {
  unsigned elem = DTYPE_BYTES[dtype];
  if (row_stride == 1 && col_stride != 1 && cols > 1 && dtype == DT_F32) {
    pack_transposed_f32((const float*)base, rows, cols, col_stride, out);
    return;
  }
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

/* How a GEMM sums: the kernel of each. */
typedef enum gemm_sum_t { SUM_F32, SUM_I32, SUM_F16, SUM_BF16 } gemm_sum_t;

/* A MAC instruction's sums: i32 for byte operands; f32, or with NARROW_SUM (f16, bf16
 * only: the checks) in the operand dtype. */
static gemm_sum_t mac_sum(const instr_t* in) {
  if (is_byte_int(in->dtype)) return SUM_I32;
  if (!(in->flags & FLAG_NARROW_SUM)) return SUM_F32;
  return in->dtype == DT_F16 ? SUM_F16 : SUM_BF16;
}

/* A packed matmul: A [m][k] with row stride lda and dense B [k][n] (with GEMM_NR
 * elements of slack) into C with row stride ldc, split into units of C (gemm_split). */
typedef struct gemm_job_t {
  gemm_sum_t sum;
  size_t m, n, k;
  const void* a;
  size_t lda;
  const void* b;
  size_t b_rows_ld;      /* 0: b is dense [k][n]; else B's column j is row j of b, this
                            its stride (m = 1, f32: matvec_rows_f32; ldb >= k >= 1) */
  uint8_t* c;
  size_t ldc;
  uint8_t* pack;         /* GEMM_PACK_BYTES per worker (gemm_split's workers) */
  size_t unit_rows, unit_cols, row_units;   /* the units of C (gemm_split) */
} gemm_job_t;

#define GEMM_PACK_BYTES ((size_t)GEMM_PACK_ELEMS * 4)

static size_t ceil_units(size_t count, size_t unit) { return (count + unit - 1) / unit; }

/* Rows i0 .. i1 - 1 by columns j0 .. j1 - 1 of C, with one worker's pack buffer. */
static void gemm_block(const gemm_job_t* g, size_t i0, size_t i1, size_t j0, size_t j1,
                       uint8_t* pack) {
  size_t k = g->k, n = g->n;
  uint8_t* c = g->c + (i0 * g->ldc + j0) * 4;
  if (g->b_rows_ld) {
    const float* b = (const float*)g->b + j0 * g->b_rows_ld;
    matvec_rows_f32(j1 - j0, k, (const float*)g->a, b, g->b_rows_ld, (float*)c);
    return;
  }
  if (g->sum == SUM_I32) {
    gemm_i32(i1 - i0, j1 - j0, k, (const int32_t*)g->a + i0 * g->lda, g->lda,
             (const int32_t*)g->b + j0, n, (int32_t*)c, g->ldc, (int32_t*)pack);
    return;
  }
  void (*gemm)(size_t, size_t, size_t, const float*, size_t, const float*, size_t, float*,
               size_t, float*) = g->sum == SUM_F16    ? gemm_f16_sum
                                 : g->sum == SUM_BF16 ? gemm_bf16_sum
                                                      : gemm_f32;
  gemm(i1 - i0, j1 - j0, k, (const float*)g->a + i0 * g->lda, g->lda,
       (const float*)g->b + j0, n, (float*)c, g->ldc, (float*)pack);
}

/* The narrowest unit of a GEMM split: whole panels of GEMM_NR, and 128 bytes of each
 * row of C, so two workers do not write neighbouring cache lines (narrower units
 * halved the speed of two threads: each row of C then shares its 128-byte pair of
 * lines, which the CPU fetches together, with the other worker's). A matrix-vector
 * product, which writes each output once after its sums, splits into its groups of
 * 4 * MATVEC_GROUPS outputs (gemm_split). */
#define GEMM_UNIT_COLS 32
_Static_assert(GEMM_UNIT_COLS % GEMM_NR == 0, "units are whole panels");
/* A GEMM split over several workers aims at this many units per worker (a worker whose
 * CPU is taken by another process then holds up the others for a small share). */
#define GEMM_UNITS_PER_WORKER 4

/* Splits g's C into units for `workers` workers; returns their count. One worker: one
 * unit. Several: blocks of about GEMM_MC rows (whole tiles) by GEMM_NC columns, each
 * with its A rows in L2 across its panels and its own packed B; smaller ones (rows
 * first, then columns) while there are fewer than GEMM_UNITS_PER_WORKER per worker. */
static size_t gemm_split(gemm_job_t* g, size_t workers) {
  size_t m = g->m, n = g->n;
  if (g->b_rows_ld) {
    g->unit_rows = m, g->unit_cols = 4 * MATVEC_GROUPS;
  } else if (workers <= 1) {
    g->unit_rows = m, g->unit_cols = n;
  } else {
    size_t want = GEMM_UNITS_PER_WORKER * workers;
    size_t row_units = ceil_units(m, GEMM_MC), col_units = ceil_units(n, GEMM_NC);
    while (row_units * col_units < want && ceil_units(m, row_units) > GEMM_MR) row_units++;
    g->unit_rows = ceil_units(ceil_units(m, row_units), GEMM_MR) * GEMM_MR;
    row_units = ceil_units(m, g->unit_rows);
    while (row_units * col_units < want && ceil_units(n, col_units) > GEMM_UNIT_COLS) {
      col_units++;
    }
    size_t cols = ceil_units(ceil_units(n, col_units), GEMM_NR) * GEMM_NR;
    g->unit_cols = cols < GEMM_UNIT_COLS ? GEMM_UNIT_COLS : cols;
  }
  if (!g->unit_rows) g->unit_rows = 1;
  if (!g->unit_cols) g->unit_cols = 1;
  g->row_units = ceil_units(m, g->unit_rows);
  return g->row_units * ceil_units(n, g->unit_cols);
}

/* Unit u: row block u % row_units of column block u / row_units (units that run at the
 * same time share their columns of B). */
static void gemm_unit(const void* job, size_t u, size_t worker) {
  const gemm_job_t* g = job;
  size_t i0 = u % g->row_units * g->unit_rows, j0 = u / g->row_units * g->unit_cols;
  size_t i1 = i0 + g->unit_rows < g->m ? i0 + g->unit_rows : g->m;
  size_t j1 = j0 + g->unit_cols < g->n ? j0 + g->unit_cols : g->n;
  gemm_block(g, i0, i1, j0, j1, g->pack + worker * GEMM_PACK_BYTES);
}

/* Runs g over the pool: its units on up to worker_count workers, each with a pack
 * buffer of the core's SCRATCH_PACK. */
static int run_gemm(exec_t* x, gemm_job_t* g) {
  uint64_t work = (uint64_t)g->m * g->n * g->k;
  if (g->b_rows_ld) work *= MATVEC_MAC_WORK;
  size_t workers = worker_count(x->pool, work, SIZE_MAX);
  size_t units = gemm_split(g, workers);
  if (workers > units) workers = units;
  g->pack = scratch(x, SCRATCH_PACK, (u128)GEMM_PACK_BYTES * workers);
  if (!g->pack) return out_of_memory(x, (u128)GEMM_PACK_BYTES * workers);
  run_units(x->pool, gemm_unit, g, units, workers);
  return NPU_STATUS_OK;
}

int exec_matmul(exec_t* x, const instr_t* in) {
  const uint32_t* a = in->a;
  int dt = in->dtype, bt = mac_b_dtype(in);
  unsigned elem = DTYPE_BYTES[dt], b_elem = DTYPE_BYTES[bt];
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
  u128 b_ext = box_extent(b_counts, b_strides, 2, b_elem);
  u128 o_ext = box_extent(o_counts, o_strides, 2, 4);
  u128 bias_ext = bias ? (u128)n * 4 : 0;
  const uint8_t *a_at, *b_at;     /* where A and B are read (npu_deferred.h), */
  size_t a_ld, b_ld;              /* their bytes between rows there */
  CHECK(check_sram_input(x, "a", a_addr, a_ext, elem, a_counts[0], (size_t)a_counts[1] * elem,
                         (size_t)lda * elem, &a_at, &a_ld));
  CHECK(check_sram_input(x, "b", b_addr, b_ext, b_elem, b_counts[0],
                         (size_t)b_counts[1] * b_elem, (size_t)ldb * b_elem, &b_at, &b_ld));
  a_ld /= elem, b_ld /= b_elem;
  CHECK(check_sram(x, "out", out_addr, o_ext, 4));
  CHECK(check_sram(x, "bias", bias_addr, bias_ext, 4));
  CHECK(check_disjoint(x, "out", out_addr, o_ext, "a", a_addr, a_ext));
  CHECK(check_disjoint(x, "out", out_addr, o_ext, "b", b_addr, b_ext));
  CHECK(check_disjoint(x, "out", out_addr, o_ext, "bias", bias_addr, bias_ext));

  uint8_t* sram = x->core->sram;
  /* An f32 A in rows is used in place; others are packed as [m][k] (element (i, kk) is
   * at lda*kk + i when transposed). A dense f32 B [k][n] with GEMM_NR elements of SRAM
   * after it (the kernel's readable slack) is used in place too: a matrix-vector
   * product (m = 1, an LSTM step) would otherwise spend as long copying B as using it;
   * for the same reason a transposed f32 B with m = 1 is read in place, by
   * matvec_rows_f32. */
  bool a_in_place = dt == DT_F32 && !ta;
  bool b_rows = bt == DT_F32 && tb && m == 1;    /* matvec_rows_f32 reads B in place */
  bool b_in_place = b_rows || (bt == DT_F32 && !tb && ldb == n && b_at == sram + b_addr &&
                               (u128)b_addr + b_ext + GEMM_NR * 4 <= x->core->config.sram_bytes);
  const void* ap = a_in_place ? a_at : scratch(x, SCRATCH_A, (u128)m * k * 4 + 4);
  const void* bp = b_in_place ? b_at : scratch(x, SCRATCH_B, (u128)k * n * 4 + GEMM_NR * 4);
  if (!ap) return out_of_memory(x, (u128)m * k * 4);
  if (!bp) return out_of_memory(x, (u128)k * n * 4);
  if (!a_in_place) pack_matrix(dt, a_at, m, k, ta ? 1 : a_ld, ta ? a_ld : 1, (uint8_t*)ap);
  if (!b_in_place) {
    pack_matrix(bt, b_at, k, n, tb ? 1 : b_ld, tb ? b_ld : 1, (uint8_t*)bp);
  }
  uint8_t* out = sram + out_addr;
  if (!acc) {
    init_accumulator(out, m, n, ldo, bias ? (const uint32_t*)(sram + bias_addr) : NULL, NULL);
  }
  gemm_job_t job = {mac_sum(in), m, n, k, ap, a_in_place ? a_ld : k, bp, b_rows ? b_ld : 0,
                    out, ldo};
  return run_gemm(x, &job);
}

/* Output rows per im2col chunk target this many columns. */
#define CONV_CHUNK_COLUMNS 256

/* The output rows of an im2col chunk: CONV_CHUNK_COLUMNS columns' worth, and with
 * several workers few enough for two chunks per worker where the rows allow, so that
 * each worker runs whole chunks (conv_unit) rather than every worker splitting each
 * chunk's im2col and GEMM (conv_split_chunks, two handoffs per chunk); at least one. */
static size_t conv_chunk_rows(size_t wo, size_t ho, size_t workers) {
  size_t rows = wo >= CONV_CHUNK_COLUMNS ? 1 : CONV_CHUNK_COLUMNS / wo;
  size_t shared = workers > 1 ? ceil_units(ho, 2 * workers) : ho;
  if (rows > shared) rows = shared;
  return rows < 1 ? 1 : rows;
}

/* A conv2d as chunks of output rows of one group each: im2col of the chunk into the
 * worker's own `col` buffer, then one GEMM with the group's packed weights. */
typedef struct conv_job_t {
  int dtype;
  gemm_sum_t sum;
  size_t cg, hi, wi, fg, wo, ho, kh, kw, sh, sw, dh, dw, groups;
  const uint8_t* in;
  const void* weights;     /* [f][kdim] f32 or i32: the SRAM operand if f32, else packed */
  uint8_t* out;
  uint8_t* col;            /* one buffer of col_bytes per worker */
  size_t col_bytes;
  size_t chunk_rows, chunks;
  uint8_t* pack;           /* GEMM_PACK_BYTES per worker (conv_unit's GEMMs) */
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
  return (gemm_job_t){j->sum, j->fg, cols, kdim, w, kdim, col, 0, o, spatial};
}

/* Unit u: chunk u % chunks of group u / chunks, all on one worker. */
static void conv_unit(const void* job, size_t u, size_t worker) {
  const conv_job_t* j = job;
  uint8_t* col = j->col + worker * j->col_bytes;
  size_t g = u / j->chunks, y0 = u % j->chunks * j->chunk_rows;
  size_t cols = conv_im2col(j, col, g, y0);
  if (stopping((uint64_t)cols * j->cg * j->kh * j->kw)) return;
  gemm_job_t gemm = conv_gemm(j, col, cols, g, y0);
  gemm_block(&gemm, 0, gemm.m, 0, gemm.n, j->pack + worker * GEMM_PACK_BYTES);
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
static int conv_split_chunks(exec_t* x, const conv_job_t* j) {
  for (size_t g = 0; g < j->groups; g++) {
    for (size_t y0 = 0; y0 < j->ho; y0 += j->chunk_rows) {
      if (stopping(0)) return NPU_STATUS_OK;
      gemm_job_t gemm = conv_gemm(j, j->col, conv_chunk_cols(j, y0), g, y0);
      uint64_t macs = (uint64_t)gemm.m * gemm.n * gemm.k;
      im2col_job_t im2col = {j, j->col, g, y0};
      run_units(x->pool, im2col_unit, &im2col, j->cg, worker_count(x->pool, macs, j->cg));
      CHECK(run_gemm(x, &gemm));
    }
  }
  return NPU_STATUS_OK;
}

/* ---- depthwise: one input channel per output channel, computed directly ----------
 * With one input and one output channel per group (dwconv2d, or a conv2d with groups =
 * c = f) the im2col GEMM of a group is one row of weights times kh*kw rows of input:
 * copying the input kh*kw times costs more than the products. With stride 1 along
 * rows these units sum each output's taps directly instead, in the GEMM's k order (ky,
 * then kx), each with FMA_STEP, so every output has the bits of the im2col path (f32:
 * one fused multiply-add per product where the target has FMA, as the GEMM kernel; i32:
 * exact). Strided convolutions and rows narrower than a vector keep the im2col path
 * (their loads do not vectorize; the GEMM packs several rows into its columns).
 * Unit u: chunk u % chunks of channel u / chunks. */
typedef int8_t dw_i8_vec __attribute__((vector_size(GEMM_LANES), aligned(1)));
typedef uint8_t dw_u8_vec __attribute__((vector_size(GEMM_LANES), aligned(1)));
typedef int16_t dw_i16_vec __attribute__((vector_size(2 * GEMM_LANES)));
typedef uint16_t dw_u16_vec __attribute__((vector_size(2 * GEMM_LANES)));
/* Bytes to i32 lanes in two widening steps: GCC 12 lowers one 4x widening of a vector
 * to a load and shift per lane, two 2x ones to vpmovsx/vpmovzx. */
#define WIDEN_I8(raw) __builtin_convertvector(__builtin_convertvector(raw, dw_i16_vec), gemm_i32_vec)
#define WIDEN_U8(raw) __builtin_convertvector(__builtin_convertvector(raw, dw_u16_vec), gemm_i32_vec)
#define WIDEN_F32(raw) (raw)

/* The GEMM_LANES outputs at o of one row, from the sums `acc`: each tap's products of
 * the input at r (the row of the first output, tap (0, 0)) added in k order. */
#define DEFINE_DEPTHWISE_BLOCK(NAME, T, S, V, VS, WIDEN)                                 \
  static inline V NAME(const conv_job_t* j, const T* w, const S* r, V acc) {            \
    for (size_t ky = 0; ky < j->kh; ky++) {                                              \
      for (size_t kx = 0; kx < j->kw; kx++) {                                            \
        /* a direct load of the unaligned vector type: GCC's Zen 3 tuning copied a   \
         * memcpy into it through the stack (two 16-byte stores, one 32-byte load     \
         * that waits for them: depthwise 2x slower on AVX2 than on AVX-512) */      \
        V x = WIDEN(*(const VS*)(r + ky * j->dh * j->wi + kx * j->dw));                  \
        FMA_STEP(acc, w[ky * j->kw + kx], x);                                            \
      }                                                                                  \
    }                                                                                    \
    return acc;                                                                          \
  }

/* Output row y of channel g, stride 1, at least GEMM_LANES wide: blocks of GEMM_LANES
 * neighbouring sums held in a vector register over all the taps; the last block ends
 * at the row's end and starts from the row's values before the run, so the outputs it
 * shares with the block before get the same sums again. */
#define DEFINE_DEPTHWISE_ROW(NAME, BLOCK, T, S, V)                                       \
  static void NAME(const conv_job_t* j, size_t g, size_t y) {                           \
    size_t wo = j->wo, last = wo - GEMM_LANES;                                           \
    const T* w = (const T*)j->weights + g * j->kh * j->kw;                               \
    const S* in = (const S*)j->in + g * j->hi * j->wi + y * j->sh * j->wi;               \
    T* o = (T*)j->out + (g * j->ho + y) * wo;                                            \
    V last_start = *(const V*)(o + last);                                                \
    for (size_t xo = 0; xo < last; xo += GEMM_LANES) {                                   \
      *(V*)(o + xo) = BLOCK(j, w, in + xo, *(const V*)(o + xo));                         \
    }                                                                                    \
    *(V*)(o + last) = BLOCK(j, w, in + last, last_start);                                \
  }
DEFINE_DEPTHWISE_BLOCK(depthwise_block_f32, float, float, gemm_f32_vec, gemm_f32_vec, WIDEN_F32)
DEFINE_DEPTHWISE_BLOCK(depthwise_block_i8, int32_t, int8_t, gemm_i32_vec, dw_i8_vec, WIDEN_I8)
DEFINE_DEPTHWISE_BLOCK(depthwise_block_u8, int32_t, uint8_t, gemm_i32_vec, dw_u8_vec, WIDEN_U8)
DEFINE_DEPTHWISE_ROW(depthwise_row_f32, depthwise_block_f32, float, float, gemm_f32_vec)
DEFINE_DEPTHWISE_ROW(depthwise_row_i8, depthwise_block_i8, int32_t, int8_t, gemm_i32_vec)
DEFINE_DEPTHWISE_ROW(depthwise_row_u8, depthwise_block_u8, int32_t, uint8_t, gemm_i32_vec)

static void depthwise_unit(const void* job, size_t u, size_t worker) {
  (void)worker;
  const conv_job_t* j = job;
  size_t g = u / j->chunks, y0 = u % j->chunks * j->chunk_rows;
  size_t y1 = y0 + j->chunk_rows < j->ho ? y0 + j->chunk_rows : j->ho;
  void (*row)(const conv_job_t*, size_t, size_t) =
      j->sum == SUM_F32 ? depthwise_row_f32 : j->dtype == DT_I8 ? depthwise_row_i8
                                                                : depthwise_row_u8;
  for (size_t y = y0; y < y1; y++) {
    row(j, g, y);
    if (stopping((uint64_t)j->wo * j->kh * j->kw)) return;
  }
}

/* Whether conv j runs as depthwise_unit's direct products: one channel per group and
 * f32 sums of f32 operands, or i32 sums of byte operands (f16/bf16 take the im2col
 * path, which converts them). */
static bool direct_depthwise(const conv_job_t* j) {
  return j->cg == 1 && j->fg == 1 && j->sw == 1 && j->wo >= GEMM_LANES &&
         ((j->sum == SUM_F32 && j->dtype == DT_F32) ||
          (j->sum == SUM_I32 && is_byte_int(j->dtype)));
}

/* conv2d and dwconv2d (conv_args). */
int exec_conv2d(exec_t* x, const instr_t* in) {
  conv_args_t p = conv_args(in);
  int dt = in->dtype, wt = mac_b_dtype(in);
  unsigned elem = DTYPE_BYTES[dt], w_elem = DTYPE_BYTES[wt];
  uint32_t c = p.c, hi = p.hi, wi = p.wi, f = p.f, ho = p.ho, wo = p.wo;
  uint32_t kh = p.kh, kw = p.kw, sh = p.sh, sw = p.sw, dh = p.dh, dw = p.dw, groups = p.groups;
  bool bias = in->flags & FLAG_BIAS, acc = in->flags & FLAG_ACCUMULATE;
  uint32_t cg = c / groups, fg = f / groups;
  u128 in_ext = (u128)c * hi * wi * elem;
  u128 w_ext = (u128)f * cg * kh * kw * w_elem;
  u128 o_ext = (u128)f * ho * wo * 4;
  u128 bias_ext = bias ? (u128)f * 4 : 0;
  const uint8_t *in_at, *w_at;    /* where the input and weights are read (npu_deferred.h) */
  size_t unused_stride;           /* (each is one contiguous run) */
  CHECK(check_sram_input(x, "in", p.in, in_ext, elem, 1, (size_t)in_ext, (size_t)in_ext, &in_at,
                         &unused_stride));
  CHECK(check_sram_input(x, "w", p.w, w_ext, w_elem, 1, (size_t)w_ext, (size_t)w_ext, &w_at,
                         &unused_stride));
  CHECK(check_sram(x, "out", p.out, o_ext, 4));
  CHECK(check_sram(x, "bias", p.bias, bias_ext, 4));
  CHECK(check_disjoint(x, "out", p.out, o_ext, "in", p.in, in_ext));
  CHECK(check_disjoint(x, "out", p.out, o_ext, "w", p.w, w_ext));
  CHECK(check_disjoint(x, "out", p.out, o_ext, "bias", p.bias, bias_ext));

  uint8_t* sram = x->core->sram;
  size_t spatial = (size_t)ho * wo;
  size_t kdim = (size_t)cg * kh * kw;
  uint64_t macs = (uint64_t)f * spatial * kdim;
  size_t workers = worker_count(x->pool, macs, SIZE_MAX);
  size_t chunk_rows = conv_chunk_rows(wo, ho, workers);
  size_t chunks = ceil_units(ho, chunk_rows);
  size_t units = (size_t)groups * chunks;
  const void* wp = wt == DT_F32 ? w_at : scratch(x, SCRATCH_A, (u128)f * kdim * 4 + 4);
  if (!wp) return out_of_memory(x, (u128)f * kdim * 4);
  uint8_t* out = sram + p.out;
  if (!acc) {
    init_accumulator(out, f, spatial, spatial, NULL,
                     bias ? (const uint32_t*)(sram + p.bias) : NULL);
  }
  if (wt != DT_F32) pack_matrix(wt, w_at, f, kdim, kdim, 1, (uint8_t*)wp);
  conv_job_t job = {dt, mac_sum(in), cg, hi, wi, fg, wo, ho, kh, kw, sh, sw, dh, dw, groups,
                    in_at, wp, out, NULL, 0, chunk_rows, chunks, NULL};
  if (direct_depthwise(&job)) {
    run_units(x->pool, depthwise_unit, &job, units, worker_count(x->pool, macs, units));
    return NPU_STATUS_OK;
  }
  /* Each worker's col buffer, with the GEMM's slack, rounded to 64 bytes. */
  job.col_bytes = (kdim * chunk_rows * wo * 4 + GEMM_NR * 4 + 63) & ~(size_t)63;
  job.col = scratch(x, SCRATCH_B, (u128)job.col_bytes * workers);
  if (!job.col) return out_of_memory(x, (u128)job.col_bytes * workers);
  if (workers > 1 && units < 2 * workers) return conv_split_chunks(x, &job);
  job.pack = scratch(x, SCRATCH_PACK, (u128)GEMM_PACK_BYTES * workers);
  if (!job.pack) return out_of_memory(x, (u128)GEMM_PACK_BYTES * workers);
  run_units(x->pool, conv_unit, &job, units, workers);
  return NPU_STATUS_OK;
}
