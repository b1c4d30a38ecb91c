// DELIBERATELY BROKEN multi-matrix and grouped-MoE WMMA GEMMs for the mutation kill
// matrix.  Never dispatch them.  Each is the real body (hq4_fused_gemm.h) with one thing
// wrong; what it breaks and what should kill it are in kernels/mutants/mutants.yaml.
#include "hq4_fused_gemm.h"

// The wrong half: the header half from the lane (lane < 16) instead of the k-tile's
// payload byte offset.
struct MutStackLaneHalf : HdrMq4v2 {
    static HQ_DEVICE void decode(Hq4Raw h, unsigned int, float& sc, float& zp) {
        const unsigned int hs = (hq_lane() < 16u) ? h.a : h.b;
        sc = hq_half_to_float(static_cast<unsigned short>(hs & 0xFFFFu));
        zp = hq_half_to_float(static_cast<unsigned short>(hs >> 16));
    }
};
struct MutStackPayloadAt4 : HdrMq4v2 {
    static constexpr unsigned int kPayloadOffset = 4;
};
// qt=45 with its payload read at +4 (in the zero pad: the retired 132 B compact offset).
struct MutStackMq4cPayloadAt4 : HdrMq4c {
    static constexpr unsigned int kPayloadOffset = 4;
};
// A wrong expert: tile t computes with the expert beside the one it was grouped for.
struct MutTileNeighbour {
    static HQ_DEVICE int expert(const int* __restrict__ tiles, unsigned int tile) {
        const int e = tiles[tile];
        return e < 0 ? e : e ^ 1;
    }
};

#if HQ_WMMA_GEN == 11
#define HQ_MUT_GEN(NAME) NAME##_wmma_gfx11
#else
#define HQ_MUT_GEN(NAME) NAME##_wmma_gfx12
#endif

HQ_GEMM_GATE_UP(HQ_MUT_GEN(gemm_mut_gate_up_lane_half), MutStackLaneHalf, 1)
HQ_GEMM_GATE_UP(HQ_MUT_GEN(gemm_mut_gate_up_payload_at4), MutStackPayloadAt4, 1)
// Swapped matrices: the gate rows from A_up, the up rows from A_gate.
#define MUT_GEMM_GATE_UP_SWAPPED(NAME, HDR)                                                 \
    HQ_GLOBAL void HQ_LAUNCH_BOUNDS(32) NAME(                                               \
        const unsigned char* __restrict__ A_gate, const unsigned char* __restrict__ A_up,   \
        const _Float16* __restrict__ X, float* __restrict__ Y_gate,                         \
        float* __restrict__ Y_up, int gate_m, int up_m, int K, int N) {                     \
        const unsigned char* W[2] = {A_up, A_gate};                                         \
        float* Y[2] = {Y_gate, Y_up};                                                       \
        const int M[2] = {gate_m, up_m};                                                    \
        gemm_stack<HDR, 1, 2>(W, X, Y, M, K, N);                                            \
    }
// Swapped matrices in the four-matrix projection: z and beta exchanged.
#define MUT_GEMM_QKVZA_SWAPPED(NAME, HDR)                                                   \
    HQ_GLOBAL void HQ_LAUNCH_BOUNDS(32) NAME(                                               \
        const unsigned char* __restrict__ A_qkv, const unsigned char* __restrict__ A_z,     \
        const unsigned char* __restrict__ A_beta, const unsigned char* __restrict__ A_alpha, \
        const _Float16* __restrict__ X, float* __restrict__ Y_qkv, float* __restrict__ Y_z, \
        float* __restrict__ Y_beta, float* __restrict__ Y_alpha, int qkv_m, int z_m,        \
        int beta_m, int alpha_m, int K, int N) {                                            \
        const unsigned char* W[4] = {A_qkv, A_beta, A_z, A_alpha};                          \
        float* Y[4] = {Y_qkv, Y_z, Y_beta, Y_alpha};                                        \
        const int M[4] = {qkv_m, z_m, beta_m, alpha_m};                                     \
        gemm_stack<HDR, 1, 4>(W, X, Y, M, K, N);                                            \
    }
// Swapped matrices in the three-matrix projection: K and V exchanged.
#define MUT_GEMM_QKV_SWAPPED(NAME, HDR)                                                     \
    HQ_GLOBAL void HQ_LAUNCH_BOUNDS(32) NAME(                                               \
        const unsigned char* __restrict__ Wq, const unsigned char* __restrict__ Wk,         \
        const unsigned char* __restrict__ Wv, const _Float16* __restrict__ X,               \
        float* __restrict__ Yq, float* __restrict__ Yk, float* __restrict__ Yv, int Mq,     \
        int Mk, int Mv, int K, int N) {                                                     \
        const unsigned char* W[3] = {Wq, Wv, Wk};                                           \
        float* Y[3] = {Yq, Yk, Yv};                                                         \
        const int M[3] = {Mq, Mk, Mv};                                                      \
        gemm_stack<HDR, 1, 3>(W, X, Y, M, K, N);                                            \
    }
MUT_GEMM_GATE_UP_SWAPPED(HQ_MUT_GEN(gemm_mut_gate_up_swapped), HdrMq4v2)
// The four-matrix projection: the wrong half, a payload at +4, z and beta swapped.
HQ_GEMM_QKVZA(HQ_MUT_GEN(gemm_mut_qkvza_lane_half), MutStackLaneHalf, 1)
HQ_GEMM_QKVZA(HQ_MUT_GEN(gemm_mut_qkvza_payload_at4), MutStackPayloadAt4, 1)
MUT_GEMM_QKVZA_SWAPPED(HQ_MUT_GEN(gemm_mut_qkvza_swapped), HdrMq4v2)
HQ_GEMM_MOE_GROUPED_ROUTED(HQ_MUT_GEN(gemm_mut_moe_wrong_expert), HdrMq4v2, MutTileNeighbour)
HQ_GEMM_MOE_GROUPED(HQ_MUT_GEN(gemm_mut_moe_lane_half), MutStackLaneHalf)
HQ_GEMM_MOE_GROUPED(HQ_MUT_GEN(gemm_mut_moe_payload_at4), MutStackPayloadAt4)

// Three-matrix projection: the wrong half, a payload at +4, K and V swapped.
HQ_GEMM_QKV(HQ_MUT_GEN(gemm_mut_qkv_lane_half), MutStackLaneHalf, 1)
HQ_GEMM_QKV(HQ_MUT_GEN(gemm_mut_qkv_payload_at4), MutStackPayloadAt4, 1)
MUT_GEMM_QKV_SWAPPED(HQ_MUT_GEN(gemm_mut_qkv_swapped), HdrMq4v2)

// The down projection's grouped GEMM: a wrong expert, the wrong half, a payload at +4, and
// the unused tile (expert -1) computed with expert 0 instead of left alone.
struct MutTileUnusedComputed {
    static HQ_DEVICE int expert(const int* __restrict__ tiles, unsigned int tile) {
        const int e = tiles[tile];
        return e < 0 ? 0 : e;
    }
};
HQ_GEMM_MOE_GROUPED_ROUTED(HQ_MUT_GEN(gemm_mut_moe_down_wrong_expert), HdrMq4v2, MutTileNeighbour)
HQ_GEMM_MOE_GROUPED_DOWN(HQ_MUT_GEN(gemm_mut_moe_down_lane_half), MutStackLaneHalf)
HQ_GEMM_MOE_GROUPED_DOWN(HQ_MUT_GEN(gemm_mut_moe_down_payload_at4), MutStackPayloadAt4)
HQ_GEMM_MOE_GROUPED_ROUTED(HQ_MUT_GEN(gemm_mut_moe_down_unused_tile), HdrMq4v2,
                           MutTileUnusedComputed)

#if HQ_WMMA_GEN == 12
// qt=45 (gfx12 only, no qt=45 MoE): a payload at +4 and swapped matrices in each
// multi-matrix projection (one header for the group: no half to get wrong).
HQ_GEMM_QKV(gemm_mut_mq4c_qkv_payload_at4_wmma_gfx12, MutStackMq4cPayloadAt4, 1)
MUT_GEMM_QKV_SWAPPED(gemm_mut_mq4c_qkv_swapped_wmma_gfx12, HdrMq4c)
HQ_GEMM_GATE_UP(gemm_mut_mq4c_gate_up_payload_at4_wmma_gfx12, MutStackMq4cPayloadAt4, 1)
MUT_GEMM_GATE_UP_SWAPPED(gemm_mut_mq4c_gate_up_swapped_wmma_gfx12, HdrMq4c)
HQ_GEMM_QKVZA(gemm_mut_mq4c_qkvza_payload_at4_wmma_gfx12, MutStackMq4cPayloadAt4, 1)
MUT_GEMM_QKVZA_SWAPPED(gemm_mut_mq4c_qkvza_swapped_wmma_gfx12, HdrMq4c)
#endif
