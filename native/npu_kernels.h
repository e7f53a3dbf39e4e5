/* The instruction kernels: one function per kind of non-control instruction, which
 * checks its operand ranges (npu_ranges.h) and computes it. The DMA engines' are in
 * npu_dma.c, the MAC array's in npu_mac.c, the vector unit's in npu_vector.c. */
#ifndef NPU_KERNELS_H_
#define NPU_KERNELS_H_

#include <stdbool.h>

#include "npu_exec.h"
#include "npu_instruction.h"

int exec_dma(exec_t* x, const instr_t* in, bool store);   /* dma.load, dma.store */
int exec_fill(exec_t* x, const instr_t* in);
int exec_matmul(exec_t* x, const instr_t* in);
int exec_conv2d(exec_t* x, const instr_t* in);            /* conv2d and dwconv2d */
int exec_binary(exec_t* x, const instr_t* in);            /* vadd ... vfma */
int exec_unary(exec_t* x, const instr_t* in);             /* vcopy, vrelu ... vround */
int exec_vcvt(exec_t* x, const instr_t* in);
int exec_vrequant(exec_t* x, const instr_t* in);          /* npu_requant.c */
int exec_vpool(exec_t* x, const instr_t* in);
int exec_vreduce(exec_t* x, const instr_t* in);

#endif /* NPU_KERNELS_H_ */
