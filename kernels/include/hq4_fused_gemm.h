// Multi-matrix and grouped-MoE prefill GEMMs on WMMA for the 136 B / 256-weight family:
// the one tile body (hq4_gemm_wmma.h, gemm_tile_io) with other sources and stores.  ABIs:
// matrices/signatures.yaml (gemm_qkv, gemm_gate_up, gemm_qkvza, gemm_moe_grouped,
// gemm_moe_grouped_down).
#ifndef HQ4_FUSED_GEMM_H
#define HQ4_FUSED_GEMM_H

#include "hq4_gemm_wmma.h"

// NW matrices of one K stacked end to end: global row m belongs to the last matrix whose
// first row is <= m (a 16-row tile may straddle two matrices; each lane and each header
// load picks its own row's matrix).
template <int NW>
struct HqSrcStack {
    // base[i] = W[i] - first[i] * row_bytes as an address, so row m of matrix i is
    // base[i] + m * row_bytes: one select of a base per row, one multiply-add.
    unsigned long long base[NW];
    int first[NW];
    unsigned long long row_bytes;
    HQ_DEVICE const unsigned char* row(int m) const {
        unsigned long long b = base[0];
        #pragma unroll
        for (int i = 1; i < NW; ++i) b = (m >= first[i]) ? base[i] : b;
        return reinterpret_cast<const unsigned char*>(
            b + static_cast<unsigned long long>(m) * row_bytes);
    }
};
template <int NW>
struct HqDstStack {  // Y_i [N][M_i]
    float* Y[NW];
    int first[NW];
    int M[NW];
    HQ_DEVICE float* at(int m, int n) const {
        float* p = Y[0] + static_cast<unsigned long long>(n) * M[0] + m;
        #pragma unroll
        for (int i = 1; i < NW; ++i) {
            if (m >= first[i]) p = Y[i] + static_cast<unsigned long long>(n) * M[i] + (m - first[i]);
        }
        return p;
    }
};

template <class Hdr, int BT, int NW>
HQ_DEVICE void gemm_stack(const unsigned char* const* W, const _Float16* __restrict__ X,
                          float* const* Y, const int* M, int K, int N) {
    HqSrcStack<NW> src;
    HqDstStack<NW> dst;
    int total = 0;
    src.row_bytes = static_cast<unsigned long long>(K >> 8) * Hdr::kGroupBytes;
    #pragma unroll
    for (int i = 0; i < NW; ++i) {
        src.base[i] = reinterpret_cast<unsigned long long>(W[i]) -
                      static_cast<unsigned long long>(total) * src.row_bytes;
        src.first[i] = total;
        dst.Y[i] = Y[i];
        dst.first[i] = total;
        dst.M[i] = M[i];
        total += M[i];
    }
    gemm_tile_io<Hdr, BT, false, OutWmma>(src, HqActX{X, K}, dst, total, K, N);
}

// Grouped MoE: block (bx, tile) computes 16 weight rows of expert expert_tile_ids[tile]
// for the tile's 16 slots; slot p reads X_src row sorted_slot_index[p] / x_row_div, a
// padding slot (-1) reads zeros (its result is 0), and a tile with expert -1 is skipped.
struct HqActGrouped {
    static constexpr bool kMayBeNull = true;
    const _Float16* __restrict__ X;
    const int* __restrict__ sorted;
    int K;
    int div;
    HQ_DEVICE const _Float16* row(int p) const {
        const int f = sorted[p];
        return f < 0 ? nullptr : X + static_cast<unsigned long long>(f / div) * K;
    }
};
struct HqTileExpert {
    static HQ_DEVICE int expert(const int* __restrict__ tiles, unsigned int tile) {
        return tiles[tile];
    }
};

template <class Hdr, class Route = HqTileExpert>
HQ_DEVICE void gemm_moe_grouped(const unsigned long long* __restrict__ ptrs,
                                const int* __restrict__ tiles, const int* __restrict__ sorted,
                                const _Float16* __restrict__ X, float* __restrict__ Y, int M,
                                int K, int x_row_div, int m_total) {
    const int e = Route::expert(tiles, hq_block_y());
    if (e < 0) return;  // an unused tile: nothing read, nothing written
    const unsigned long long row_bytes = static_cast<unsigned long long>(K >> 8) * Hdr::kGroupBytes;
    const HqSrcW src{reinterpret_cast<const unsigned char*>(ptrs[e]), row_bytes};
    gemm_tile_io<Hdr, 1, false, OutWmma>(src, HqActGrouped{X, sorted, K, x_row_div},
                                         HqDstY{Y, M}, M, K, m_total);
}

#define HQ_GEMM_QKV(NAME, HDR, BT)                                                          \
    HQ_GLOBAL void HQ_LAUNCH_BOUNDS(32) NAME(                                               \
        const unsigned char* __restrict__ Wq, const unsigned char* __restrict__ Wk,         \
        const unsigned char* __restrict__ Wv, const _Float16* __restrict__ X,               \
        float* __restrict__ Yq, float* __restrict__ Yk, float* __restrict__ Yv, int Mq,     \
        int Mk, int Mv, int K, int N) {                                                     \
        const unsigned char* W[3] = {Wq, Wk, Wv};                                           \
        float* Y[3] = {Yq, Yk, Yv};                                                         \
        const int M[3] = {Mq, Mk, Mv};                                                      \
        gemm_stack<HDR, BT, 3>(W, X, Y, M, K, N);                                           \
    }

#define HQ_GEMM_GATE_UP(NAME, HDR, BT)                                                      \
    HQ_GLOBAL void HQ_LAUNCH_BOUNDS(32) NAME(                                               \
        const unsigned char* __restrict__ A_gate, const unsigned char* __restrict__ A_up,   \
        const _Float16* __restrict__ X, float* __restrict__ Y_gate,                         \
        float* __restrict__ Y_up, int gate_m, int up_m, int K, int N) {                     \
        const unsigned char* W[2] = {A_gate, A_up};                                         \
        float* Y[2] = {Y_gate, Y_up};                                                       \
        const int M[2] = {gate_m, up_m};                                                    \
        gemm_stack<HDR, BT, 2>(W, X, Y, M, K, N);                                           \
    }

#define HQ_GEMM_QKVZA(NAME, HDR, BT)                                                        \
    HQ_GLOBAL void HQ_LAUNCH_BOUNDS(32) NAME(                                               \
        const unsigned char* __restrict__ A_qkv, const unsigned char* __restrict__ A_z,     \
        const unsigned char* __restrict__ A_beta, const unsigned char* __restrict__ A_alpha, \
        const _Float16* __restrict__ X, float* __restrict__ Y_qkv, float* __restrict__ Y_z, \
        float* __restrict__ Y_beta, float* __restrict__ Y_alpha, int qkv_m, int z_m,        \
        int beta_m, int alpha_m, int K, int N) {                                            \
        const unsigned char* W[4] = {A_qkv, A_z, A_beta, A_alpha};                          \
        float* Y[4] = {Y_qkv, Y_z, Y_beta, Y_alpha};                                        \
        const int M[4] = {qkv_m, z_m, beta_m, alpha_m};                                     \
        gemm_stack<HDR, BT, 4>(W, X, Y, M, K, N);                                           \
    }

#define HQ_GEMM_MOE_GROUPED_ROUTED(NAME, HDR, ROUTE)                                        \
    HQ_GLOBAL void HQ_LAUNCH_BOUNDS(32) NAME(                                               \
        const unsigned long long* __restrict__ expert_weight_ptrs,                          \
        const int* __restrict__ expert_tile_ids, const int* __restrict__ sorted_slot_index, \
        const _Float16* __restrict__ X_src, float* __restrict__ Y_grouped, int M, int K,    \
        int x_row_div, int m_total) {                                                       \
        gemm_moe_grouped<HDR, ROUTE>(expert_weight_ptrs, expert_tile_ids,                   \
                                     sorted_slot_index, X_src, Y_grouped, M, K, x_row_div,  \
                                     m_total);                                              \
    }
#define HQ_GEMM_MOE_GROUPED(NAME, HDR) HQ_GEMM_MOE_GROUPED_ROUTED(NAME, HDR, HqTileExpert)
// The down projection's grouped GEMM (gemm_moe_grouped_down): the same ABI and body, over
// X_src [N * k_top][K] (one activation row per routed slot, x_row_div 1) and any M.
#define HQ_GEMM_MOE_GROUPED_DOWN(NAME, HDR) HQ_GEMM_MOE_GROUPED_ROUTED(NAME, HDR, HqTileExpert)

#endif  // HQ4_FUSED_GEMM_H
