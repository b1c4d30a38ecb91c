// DELIBERATELY BROKEN fused-projection and MoE decode GEMVs for the mutation kill matrix.
// Never dispatch them.  Each is the real body (hq4_fused_gemv.h) with one thing wrong;
// what it breaks and what should kill it are in kernels/mutants/mutants.yaml.
#include "hq4_fused_gemv.h"

// The wrong half: the header half picked from the lane id with the wrong split (lane < 8)
// instead of the payload byte offset (>= 64 is half 1).
struct MutFusedLaneHalf : HdrMq4v2 {
    static HQ_DEVICE void decode(Hq4Raw h, unsigned int, float& sc, float& zp) {
        const unsigned int hs = (hq_lane() < 8u) ? h.a : h.b;
        sc = hq_half_to_float(static_cast<unsigned short>(hs & 0xFFFFu));
        zp = hq_half_to_float(static_cast<unsigned short>(hs >> 16));
    }
};
// The payload read at +4 (inside the header) instead of +8.
struct MutFusedPayloadAt4 : HdrMq4v2 {
    static constexpr unsigned int kPayloadOffset = 4;
};
// qt=45 with its payload read at +4 (in the zero pad: the retired 132 B compact offset).
struct MutFusedMq4cPayloadAt4 : HdrMq4c {
    static constexpr unsigned int kPayloadOffset = 4;
};
// A wrong expert: rank r reads the expert beside the one the routing chose.
struct MutRouteNeighbour {
    static HQ_DEVICE int expert(const int* __restrict__ topk, unsigned int rank) {
        return topk[rank] ^ 1;
    }
};

// Swapped matrices: the gate rows computed from A_up and the up rows from A_gate.
#define MUT_GEMV_GATE_UP_SWAPPED(NAME, HDR)                                                 \
    HQ_GLOBAL void HQ_GEMV_BOUNDS NAME(                                                     \
        const unsigned char* __restrict__ A_gate, const unsigned char* __restrict__ A_up,   \
        const float* __restrict__ x, float* __restrict__ y_gate, float* __restrict__ y_up,  \
        int gate_m, int up_m, int K) {                                                      \
        const unsigned char* W[2] = {A_up, A_gate};                                         \
        float* y[2] = {y_gate, y_up};                                                       \
        const int M[2] = {gate_m, up_m};                                                    \
        gemv_fused<HDR, 1, 2>(W, x, y, M, K);                                               \
    }
// Swapped matrices in the four-matrix projection: z and beta exchanged.
#define MUT_GEMV_QKVZA_SWAPPED(NAME, HDR)                                                   \
    HQ_GLOBAL void HQ_GEMV_BOUNDS NAME(                                                     \
        const unsigned char* __restrict__ A_qkv, const unsigned char* __restrict__ A_z,     \
        const unsigned char* __restrict__ A_beta, const unsigned char* __restrict__ A_alpha, \
        const float* __restrict__ x, float* __restrict__ y_qkv, float* __restrict__ y_z,    \
        float* __restrict__ y_beta, float* __restrict__ y_alpha, int qkv_m, int z_m,        \
        int beta_m, int alpha_m, int K) {                                                   \
        const unsigned char* W[4] = {A_qkv, A_beta, A_z, A_alpha};                          \
        float* y[4] = {y_qkv, y_z, y_beta, y_alpha};                                        \
        const int M[4] = {qkv_m, z_m, beta_m, alpha_m};                                     \
        gemv_fused<HDR, 1, 4>(W, x, y, M, K);                                               \
    }

HQ_GEMV_GATE_UP(gemv_mut_gate_up_lane_half_r1, MutFusedLaneHalf, 1)
HQ_GEMV_GATE_UP(gemv_mut_gate_up_payload_at4_r1, MutFusedPayloadAt4, 1)
MUT_GEMV_GATE_UP_SWAPPED(gemv_mut_gate_up_swapped_r1, HdrMq4v2)
HQ_GEMV_QKVZA(gemv_mut_qkvza_lane_half_r1, MutFusedLaneHalf, 1)
HQ_GEMV_QKVZA(gemv_mut_qkvza_payload_at4_r1, MutFusedPayloadAt4, 1)
MUT_GEMV_QKVZA_SWAPPED(gemv_mut_qkvza_swapped_r1, HdrMq4v2)
// qt=45: a payload at +4 and swapped matrices (one header for the group: no half to get
// wrong).
HQ_GEMV_GATE_UP(gemv_mut_mq4c_gate_up_payload_at4_r1, MutFusedMq4cPayloadAt4, 1)
MUT_GEMV_GATE_UP_SWAPPED(gemv_mut_mq4c_gate_up_swapped_r1, HdrMq4c)
HQ_GEMV_QKVZA(gemv_mut_mq4c_qkvza_payload_at4_r1, MutFusedMq4cPayloadAt4, 1)
MUT_GEMV_QKVZA_SWAPPED(gemv_mut_mq4c_qkvza_swapped_r1, HdrMq4c)
HQ_GEMV_MOE_GATE_UP_ROUTED(gemv_mut_moe_wrong_expert_r1, HdrMq4v2, 1, MutRouteNeighbour)
HQ_GEMV_MOE_GATE_UP(gemv_mut_moe_lane_half_r1, MutFusedLaneHalf, 1)
HQ_GEMV_MOE_GATE_UP(gemv_mut_moe_payload_at4_r1, MutFusedPayloadAt4, 1)
// Swapped matrices in the stacked expert: its gate rows stored as y_up, its up rows as
// y_gate.
struct MutStoreGateUpSwapped {
    float* __restrict__ yg;
    float* __restrict__ yu;
    int mi;
    int rank;
    HQ_DEVICE float* at(int row) const {
        return row < mi ? yu + rank * mi + row : yg + rank * mi + (row - mi);
    }
    HQ_DEVICE float load(int row) const { return *at(row); }
    HQ_DEVICE void store(int row, float v) const { *at(row) = v; }
};
HQ_GLOBAL void HQ_GEMV_BOUNDS gemv_mut_moe_gate_up_swapped_r1(
    const unsigned long long* __restrict__ expert_ptrs, const int* __restrict__ topk_indices,
    const float* __restrict__ x, float* __restrict__ y_gate, float* __restrict__ y_up, int M,
    int K) {
    const unsigned int rank = hq_block_y();
    const unsigned char* __restrict__ W =
        reinterpret_cast<const unsigned char*>(expert_ptrs[topk_indices[rank]]);
    gemv_rows_to<HqTableHdr<HdrMq4v2>, 1, false>(
        W, x, MutStoreGateUpSwapped{y_gate, y_up, M >> 1, static_cast<int>(rank)}, M, K,
        hq_block_x());
}
// MoE down: a wrong expert, the wrong half, a payload at +4, and the routing weight
// dropped (every rank added with weight 1).
HQ_GEMV_MOE_DOWN_ROUTED(gemv_mut_moe_down_wrong_expert_r1, HdrMq4v2, 1, MutRouteNeighbour)
HQ_GEMV_MOE_DOWN(gemv_mut_moe_down_lane_half_r1, MutFusedLaneHalf, 1)
HQ_GEMV_MOE_DOWN(gemv_mut_moe_down_payload_at4_r1, MutFusedPayloadAt4, 1)
HQ_GLOBAL void HQ_GEMV_BOUNDS gemv_mut_moe_down_unscaled_r1(
    const unsigned long long* __restrict__ expert_ptrs, const int* __restrict__ topk_indices,
    const float* __restrict__ topk_weights, const float* __restrict__ rot_batch,
    float* __restrict__ x_residual, int M, int K) {
    (void)topk_weights;
    const unsigned int rank = hq_block_y();
    const unsigned char* __restrict__ W =
        reinterpret_cast<const unsigned char*>(expert_ptrs[topk_indices[rank]]);
    gemv_rows_to<HqTableHdr<HdrMq4v2>, 1, false>(
        W, rot_batch + static_cast<unsigned long long>(rank) * K,
        HqStoreScaledAdd{x_residual, 1.0f}, M, K, hq_block_x());
}
