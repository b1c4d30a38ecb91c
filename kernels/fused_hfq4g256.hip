// Fused-projection and MoE decode GEMVs for the 136 B / 256-weight family: qt=6 (the v1
// baseline), qt=44 and qt=45 (no qt=45 MoE: the design note wires MoE for qt=44 only).
// ABIs (matrices/signatures.yaml): gemv_gate_up, gemv_qkvza, gemv_moe_gate_up,
// gemv_moe_down.  One GEMV body (hq4_gemv.h) instantiated per header decoder, so equal
// halves stay bit-identical.
#include "hq4_fused_gemv.h"

#define HQ_FUSED_FORMAT(PREFIX, HDR)                        \
    HQ_GEMV_GATE_UP(PREFIX##_gate_up_r1, HDR, 1)            \
    HQ_GEMV_QKVZA(PREFIX##_qkvza_r1, HDR, 1)

HQ_FUSED_FORMAT(gemv_hfq4g256, HdrHfq4v1)
HQ_FUSED_FORMAT(gemv_mq4g256v2, HdrMq4v2)
HQ_FUSED_FORMAT(gemv_mq4c, HdrMq4c)
HQ_GEMV_MOE_GATE_UP(gemv_hfq4g256_moe_gate_up_r1, HdrHfq4v1, 1)
HQ_GEMV_MOE_GATE_UP(gemv_mq4g256v2_moe_gate_up_r1, HdrMq4v2, 1)
HQ_GEMV_MOE_DOWN(gemv_hfq4g256_moe_down_r1, HdrHfq4v1, 1)
HQ_GEMV_MOE_DOWN(gemv_mq4g256v2_moe_down_r1, HdrMq4v2, 1)
