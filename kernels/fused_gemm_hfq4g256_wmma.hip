// Multi-matrix (QKV, gate/up, QKVZA) and grouped-MoE (gate/up, down) prefill GEMMs on
// WMMA for the 136 B / 256-weight family.  AMD only.  gfx11: qt=6 and qt=44 (no qt=45
// gfx11 sibling, design note section 9); gfx12: qt=6, qt=44 and qt=45 (no qt=45 MoE).
// ABIs: matrices/signatures.yaml (gemm_qkv, gemm_gate_up, gemm_qkvza, gemm_moe_grouped,
// gemm_moe_grouped_down).
#include "hq4_fused_gemm.h"

#if HQ_WMMA_GEN == 11
#define HQ_FUSED_GEMM(PREFIX, HDR)                                  \
    HQ_GEMM_QKV(PREFIX##_qkv_wmma_gfx11, HDR, 1)                    \
    HQ_GEMM_GATE_UP(PREFIX##_gate_up_wmma_gfx11, HDR, 1)            \
    HQ_GEMM_QKVZA(PREFIX##_qkvza_wmma_gfx11, HDR, 1)                \
    HQ_GEMM_MOE_GROUPED(PREFIX##_moe_grouped_wmma_gfx11, HDR)       \
    HQ_GEMM_MOE_GROUPED_DOWN(PREFIX##_moe_grouped_down_wmma_gfx11, HDR)
HQ_FUSED_GEMM(gemm_hfq4g256, HdrHfq4v1)
HQ_FUSED_GEMM(gemm_mq4g256v2, HdrMq4v2)
#else
#define HQ_FUSED_GEMM(PREFIX, HDR)                                  \
    HQ_GEMM_QKV(PREFIX##_qkv_wmma_gfx12, HDR, 1)                    \
    HQ_GEMM_GATE_UP(PREFIX##_gate_up_wmma_gfx12, HDR, 1)            \
    HQ_GEMM_QKVZA(PREFIX##_qkvza_wmma_gfx12, HDR, 1)
HQ_FUSED_GEMM(gemm_hfq4g256, HdrHfq4v1)
HQ_FUSED_GEMM(gemm_mq4g256v2, HdrMq4v2)
HQ_FUSED_GEMM(gemm_mq4c, HdrMq4c)
HQ_GEMM_MOE_GROUPED(gemm_hfq4g256_moe_grouped_wmma_gfx12, HdrHfq4v1)
HQ_GEMM_MOE_GROUPED(gemm_mq4g256v2_moe_grouped_wmma_gfx12, HdrMq4v2)
HQ_GEMM_MOE_GROUPED_DOWN(gemm_hfq4g256_moe_grouped_down_wmma_gfx12, HdrHfq4v1)
HQ_GEMM_MOE_GROUPED_DOWN(gemm_mq4g256v2_moe_grouped_down_wmma_gfx12, HdrMq4v2)
#endif
