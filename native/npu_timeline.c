/* The cycle model and the engines' timeline (npu_timeline.h). */
#include "npu_timeline.h"

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
      /* a row of n3 elements, dram_s3 apart, moves the bursts it spans, at most one per
       * element (executable_format/cost.py) */
      uint64_t span = ((uint64_t)(a[DMA_N3] - 1) * a[DMA_DRAM_S3] + 1) * elem;
      uint64_t row_bursts = ceil_div(span, m->dma_burst_bytes);
      if (row_bursts > a[DMA_N3]) row_bursts = a[DMA_N3];
      uint64_t rows = (uint64_t)a[DMA_N0] * a[DMA_N1] * a[DMA_N2];
      uint64_t moved = rows * row_bursts * m->dma_burst_bytes;
      return m->dma_latency_cycles + ceil_div(moved, m->dram_bytes_per_cycle);
    }
    case OP_FILL:
      return 1 + ceil_div((uint64_t)a[FILL_N0] * a[FILL_N1] * a[FILL_N2] * a[FILL_N3] * elem,
                          m->sram_bytes_per_cycle);
    case OP_MATMUL:
      return m->mac_latency_cycles + (uint64_t)a[MATMUL_M] * ceil_div(a[MATMUL_N], m->mac_cols) *
                                         ceil_div(a[MATMUL_K], k_lanes(m, in->dtype));
    case OP_CONV2D: {
      /* per group: the output channels on the columns for each pixel, or with
       * PIXEL_COLUMNS the pixels on the columns for each channel (cost.conv2d_steps) */
      uint64_t groups = a[CONV2D_GROUPS];
      uint64_t fgroup = a[CONV2D_F] / a[CONV2D_GROUPS];
      uint64_t pixels = (uint64_t)a[CONV2D_HO] * a[CONV2D_WO];
      uint64_t kgroup = (uint64_t)(a[CONV2D_C] / a[CONV2D_GROUPS]) * lo16(a[CONV2D_KH_KW]) *
                        hi16(a[CONV2D_KH_KW]);
      uint64_t taps = ceil_div(kgroup, k_lanes(m, in->dtype));
      uint64_t steps = (in->flags & FLAG_PIXEL_COLUMNS)
                           ? groups * fgroup * ceil_div(pixels, m->mac_cols) * taps
                           : groups * pixels * ceil_div(fgroup, m->mac_cols) * taps;
      return m->mac_latency_cycles + steps;
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
    case OP_VREQUANT: {   /* the larger element size, as vcvt */
      unsigned src = requant_src_bytes(in->flags);
      return vector_cycles(m, (uint64_t)a[VREQUANT_N0] * a[VREQUANT_N1] * a[VREQUANT_N2],
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

uint64_t instruction_macs(const instr_t* in) {
  const uint32_t* a = in->a;
  if (in->opcode == OP_MATMUL) return (uint64_t)a[MATMUL_M] * a[MATMUL_N] * a[MATMUL_K];
  if (in->opcode == OP_CONV2D || in->opcode == OP_DWCONV2D) {
    conv_args_t p = conv_args(in);
    return (uint64_t)p.ho * p.wo * p.f * (p.c / p.groups) * p.kh * p.kw;
  }
  return 0;
}

void control_instruction(exec_t* x, timeline_t* t, const instr_t* in) {
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

void account(exec_t* x, timeline_t* t, const instr_t* in, npu_trace_event_t* trace,
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
