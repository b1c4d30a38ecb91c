// Fused and MoE decode GEMVs for the 136 B / 256-weight family: the one GEMV body
// (hq4_gemv.h, gemv_rows_to) with other row sources and result stores.  ABIs:
// matrices/signatures.yaml (gemv_gate_up, gemv_qkvza, gemv_moe_gate_up, gemv_moe_down).
#ifndef HQ4_FUSED_GEMV_H
#define HQ4_FUSED_GEMV_H

#include "hq4_gemv.h"

// NW matrices of one K in one launch: blocks run over the matrices in argument order,
// ceil(M_i / R) blocks each; block b of matrix i computes its rows R*b .. R*b+R-1.
template <class Hdr, int R, int NW>
HQ_DEVICE void gemv_fused(const unsigned char* const* W, const float* __restrict__ x,
                          float* const* y, const int* M, int K) {
    unsigned int b = hq_block_x();
    #pragma unroll
    for (int i = 0; i < NW; ++i) {
        const unsigned int blocks = static_cast<unsigned int>((M[i] + R - 1) / R);
        if (b < blocks) {
            gemv_rows<Hdr, R, false>(W[i], x, y[i], M[i], K, b);
            return;
        }
        b -= blocks;
    }
}

// The header decoder of a matrix reached through a pointer table.  Such weights are not
// known unclobbered (the kernel stores through its outputs), so their header loads stay
// vector loads, and clang-19 for gfx1010 folded the half select into one load from a
// lane-dependent address (gp or gp + 4: the ISA audit's header_scalar rule failed it).
// Each header dword is kept apart from its load (hq_uniform_u32, an empty asm), so the
// half is selected between two loaded values from lane-invariant addresses.  v1 and v2
// take the same wrapper: their instruction counts still differ only in the decode.
template <class Hdr>
struct HqTableHdr : Hdr {
    static HQ_DEVICE Hq4Raw load(const unsigned char* __restrict__ gp, unsigned int boff) {
        const Hq4Raw h = Hdr::load(gp, boff);
        return Hq4Raw{hq_uniform_u32(h.a), Hdr::kDwords == 2 ? hq_uniform_u32(h.b) : h.b};
    }
};

// MoE gate/up result of rank `rank`: each expert's matrix stacks gate rows 0..M/2 over up
// rows M/2..M; y_gate and y_up are [k_top][M/2].
struct HqStoreGateUp {
    float* __restrict__ yg;
    float* __restrict__ yu;
    int mi;
    int rank;
    HQ_DEVICE float* at(int row) const {
        return row < mi ? yg + rank * mi + row : yu + rank * mi + (row - mi);
    }
    HQ_DEVICE float load(int row) const { return *at(row); }
    HQ_DEVICE void store(int row, float v) const { *at(row) = v; }
};

// The expert a rank reads: the routing's choice, through the pointer table.  Both loads
// are at lane-invariant addresses (scalar loads).
struct HqRouteTopk {
    static HQ_DEVICE int expert(const int* __restrict__ topk, unsigned int rank) {
        return topk[rank];
    }
};

// MoE indexed decode: grid (ceil(M / R), k_top); block (bx, rank) computes rows of expert
// topk[rank]'s matrix.
template <class Hdr, int R, class Route = HqRouteTopk>
HQ_DEVICE void gemv_moe_gate_up(const unsigned long long* __restrict__ ptrs,
                                const int* __restrict__ topk, const float* __restrict__ x,
                                float* __restrict__ yg, float* __restrict__ yu, int M, int K) {
    const unsigned int rank = hq_block_y();
    const int e = Route::expert(topk, rank);
    const unsigned char* __restrict__ W = reinterpret_cast<const unsigned char*>(ptrs[e]);
    gemv_rows_to<HqTableHdr<Hdr>, R, false>(
        W, x, HqStoreGateUp{yg, yu, M >> 1, static_cast<int>(rank)}, M, K, hq_block_x());
}

// MoE down result of rank `rank`: the routing weight times the row's dot product, added
// to x_residual[row] atomically (the k_top ranks of one row are k_top blocks, grid.y), so
// the ranks land in whatever order the blocks finish.  Never read: Residual is false.
struct HqStoreScaledAdd {
    float* __restrict__ y;
    float w;
    HQ_DEVICE float load(int) const { return 0.0f; }
    HQ_DEVICE void store(int row, float v) const { hq_atomic_add_f32(y + row, w * v); }
};

// MoE indexed down: grid (ceil(M / R), k_top); block (bx, rank) computes rows of expert
// topk[rank]'s matrix against rank's activation row rot_batch[rank] (each [K]) and adds
// topk_weights[rank] times the result into x_residual.  The expert, its pointer and the
// weight are read at lane-invariant addresses (scalar loads).
template <class Hdr, int R, class Route = HqRouteTopk>
HQ_DEVICE void gemv_moe_down(const unsigned long long* __restrict__ ptrs,
                             const int* __restrict__ topk, const float* __restrict__ topk_w,
                             const float* __restrict__ rot, float* __restrict__ y, int M,
                             int K) {
    const unsigned int rank = hq_block_y();
    const int e = Route::expert(topk, rank);
    const unsigned char* __restrict__ W = reinterpret_cast<const unsigned char*>(ptrs[e]);
    const float* __restrict__ x = rot + static_cast<unsigned long long>(rank) * K;
    gemv_rows_to<HqTableHdr<Hdr>, R, false>(W, x, HqStoreScaledAdd{y, topk_w[rank]}, M, K,
                                            hq_block_x());
}

#define HQ_GEMV_GATE_UP(NAME, HDR, R)                                                       \
    HQ_GLOBAL void HQ_GEMV_BOUNDS NAME(                                                     \
        const unsigned char* __restrict__ A_gate, const unsigned char* __restrict__ A_up,   \
        const float* __restrict__ x, float* __restrict__ y_gate, float* __restrict__ y_up,  \
        int gate_m, int up_m, int K) {                                                      \
        const unsigned char* W[2] = {A_gate, A_up};                                         \
        float* y[2] = {y_gate, y_up};                                                       \
        const int M[2] = {gate_m, up_m};                                                    \
        gemv_fused<HDR, R, 2>(W, x, y, M, K);                                               \
    }

#define HQ_GEMV_QKVZA(NAME, HDR, R)                                                         \
    HQ_GLOBAL void HQ_GEMV_BOUNDS NAME(                                                     \
        const unsigned char* __restrict__ A_qkv, const unsigned char* __restrict__ A_z,     \
        const unsigned char* __restrict__ A_beta, const unsigned char* __restrict__ A_alpha, \
        const float* __restrict__ x, float* __restrict__ y_qkv, float* __restrict__ y_z,    \
        float* __restrict__ y_beta, float* __restrict__ y_alpha, int qkv_m, int z_m,        \
        int beta_m, int alpha_m, int K) {                                                   \
        const unsigned char* W[4] = {A_qkv, A_z, A_beta, A_alpha};                          \
        float* y[4] = {y_qkv, y_z, y_beta, y_alpha};                                        \
        const int M[4] = {qkv_m, z_m, beta_m, alpha_m};                                     \
        gemv_fused<HDR, R, 4>(W, x, y, M, K);                                               \
    }

#define HQ_GEMV_MOE_GATE_UP_ROUTED(NAME, HDR, R, ROUTE)                                     \
    HQ_GLOBAL void HQ_GEMV_BOUNDS NAME(                                                     \
        const unsigned long long* __restrict__ expert_ptrs,                                 \
        const int* __restrict__ topk_indices, const float* __restrict__ x,                  \
        float* __restrict__ y_gate, float* __restrict__ y_up, int M, int K) {               \
        gemv_moe_gate_up<HDR, R, ROUTE>(expert_ptrs, topk_indices, x, y_gate, y_up, M, K);  \
    }
#define HQ_GEMV_MOE_GATE_UP(NAME, HDR, R) HQ_GEMV_MOE_GATE_UP_ROUTED(NAME, HDR, R, HqRouteTopk)

#define HQ_GEMV_MOE_DOWN_ROUTED(NAME, HDR, R, ROUTE)                                        \
    HQ_GLOBAL void HQ_GEMV_BOUNDS NAME(                                                     \
        const unsigned long long* __restrict__ expert_ptrs,                                 \
        const int* __restrict__ topk_indices, const float* __restrict__ topk_weights,       \
        const float* __restrict__ rot_batch, float* __restrict__ x_residual, int M, int K) { \
        gemv_moe_down<HDR, R, ROUTE>(expert_ptrs, topk_indices, topk_weights, rot_batch,    \
                                     x_residual, M, K);                                     \
    }
#define HQ_GEMV_MOE_DOWN(NAME, HDR, R) HQ_GEMV_MOE_DOWN_ROUTED(NAME, HDR, R, HqRouteTopk)

#endif  // HQ4_FUSED_GEMV_H
