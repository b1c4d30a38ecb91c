// DELIBERATELY BROKEN WMMA prefill GEMM kernels for the mutation kill matrix (`hqval mutants`).
// Never dispatch them.  See kernels/mutants/mutants.yaml for what each breaks.
#include "hq4_gemm_wmma.h"

// The body's half select (k-tile kt covers payload bytes 8kt..8kt+7, half = kt >= 8)
// replaced by a lane test: on gfx11 every lane applies half 0's header to all 16 k-tiles
// (lanes 0..15) or half 1's (16..31); on gfx12 lanes split K inside each tile instead.
struct MutGemmLaneHalf : HdrMq4v2 {
    static HQ_DEVICE void decode(Hq4Raw h, unsigned int, float& sc, float& zp) {
        const unsigned int hs = (hq_lane() < 16u) ? h.a : h.b;
        sc = hq_half_to_float(static_cast<unsigned short>(hs & 0xFFFFu));
        zp = hq_half_to_float(static_cast<unsigned short>(hs >> 16));
    }
};

// Output mapping transposed inside the 16x16 tile: D[m][n] stored to Y[m][n] positions.
struct MutOutTransposed {
    static HQ_DEVICE void coords(int i, unsigned int lane, int& m, int& n) {
        OutWmma::coords(i, lane, n, m);
    }
};

// The payload read at +4 (qt=44: inside the header; qt=45: in the zero pad, the retired
// 132 B compact offset) instead of +8.
struct MutGemmPayloadAt4 : HdrMq4v2 {
    static constexpr unsigned int kPayloadOffset = 4;
};
struct MutGemmMq4cPayloadAt4 : HdrMq4c {
    static constexpr unsigned int kPayloadOffset = 4;
};

#if HQ_WMMA_GEN == 11
HQ_GEMM(gemm_mut_lane_half_wmma_gfx11, MutGemmLaneHalf, 1, false)
HQ_GEMM(gemm_mut_payload_at4_wmma_gfx11, MutGemmPayloadAt4, 1, false)
HQ_GEMM(gemm_mut_no_residual_wmma_gfx11, HdrMq4v2, 1, false)
HQ_GLOBAL void HQ_LAUNCH_BOUNDS(32) gemm_mut_transposed_out_wmma_gfx11(
    const unsigned char* __restrict__ W, const _Float16* __restrict__ X,
    float* __restrict__ Y, int M, int K, int N) {
    gemm_tile<HdrMq4v2, 1, false, MutOutTransposed>(W, X, Y, M, K, N);
}
#else
HQ_GEMM(gemm_mut_lane_half_wmma_gfx12, MutGemmLaneHalf, 1, false)
HQ_GEMM(gemm_mut_payload_at4_wmma_gfx12, MutGemmPayloadAt4, 1, false)
HQ_GEMM(gemm_mut_mq4c_payload_at4_wmma_gfx12, MutGemmMq4cPayloadAt4, 1, false)
HQ_GLOBAL void HQ_LAUNCH_BOUNDS(32) gemm_mut_transposed_out_wmma_gfx12(
    const unsigned char* __restrict__ W, const _Float16* __restrict__ X,
    float* __restrict__ Y, int M, int K, int N) {
    gemm_tile<HdrMq4v2, 1, false, MutOutTransposed>(W, X, Y, M, K, N);
}
#endif
