// Prefill GEMM for the 136 B / 256-weight family on WMMA (wave32 16x16x16 f16 -> f32).
// AMD only: gfx11 (RDNA3/3.5) and gfx12 (RDNA4) instruction forms.
//
// ABI (docs/ARCHITECTURE.md): NAME(const unsigned char* W, const _Float16* X, float* Y,
// int M, int K, int N); X row-major [N][K]; Y row-major [N][M];
// Y[n][m] (+)= sum_k deq(W)[m,k] * X[n][k]; block 32; grid (ceil(M/16), ceil(N/(16*BT))).
//
// One block computes a 16-row x (16*BT)-token tile.  The weight tile is the WMMA A operand
// (lane l holds row l%16), the activations the B operand (lane l holds token l%16); each
// dequantized A tile is reused for BT B tiles (weight reuse).  Weights are dequantized as
// q * sc + zp and go to the WMMA as f16: clang-19 fuses the two into v_fma_mix{lo,hi}_f16
// (the exact q*sc+zp rounded once, to f16).  So a GEMM matches the GEMV only to f16 input
// rounding, while qt=44/45 match qt=6 bit for bit with equal headers (same instructions).
#include "hq4_gemm_wmma.h"

#if HQ_WMMA_GEN == 11
// gfx11: qt=6 and qt=44 (base, residual, BT 4/6/8).  No qt=45 sibling on gfx11: that arch
// falls back to per-token decode (design note section 9).
#define HQ_GEMM_GFX11(PREFIX, HDR)                          \
    HQ_GEMM(PREFIX##_wmma_gfx11, HDR, 1, false)             \
    HQ_GEMM(PREFIX##_wmma_gfx11_residual, HDR, 1, true)     \
    HQ_GEMM(PREFIX##_wmma_gfx11_bt4, HDR, 4, false)         \
    HQ_GEMM(PREFIX##_wmma_gfx11_bt6, HDR, 6, false)         \
    HQ_GEMM(PREFIX##_wmma_gfx11_bt8, HDR, 8, false)
#if !defined(HQ_GEMM_ONLY) || HQ_GEMM_ONLY == 1
HQ_GEMM_GFX11(gemm_hfq4g256, HdrHfq4v1)
#endif
#if !defined(HQ_GEMM_ONLY) || HQ_GEMM_ONLY == 44
HQ_GEMM_GFX11(gemm_mq4g256v2, HdrMq4v2)
#endif
#else
// gfx12: qt=6, qt=44 and qt=45 (base and residual).
#define HQ_GEMM_GFX12(PREFIX, HDR)                          \
    HQ_GEMM(PREFIX##_wmma_gfx12, HDR, 1, false)             \
    HQ_GEMM(PREFIX##_wmma_gfx12_residual, HDR, 1, true)
#if !defined(HQ_GEMM_ONLY) || HQ_GEMM_ONLY == 1
HQ_GEMM_GFX12(gemm_hfq4g256, HdrHfq4v1)
#endif
#if !defined(HQ_GEMM_ONLY) || HQ_GEMM_ONLY == 44
HQ_GEMM_GFX12(gemm_mq4g256v2, HdrMq4v2)
#endif
#if !defined(HQ_GEMM_ONLY) || HQ_GEMM_ONLY == 45
HQ_GEMM_GFX12(gemm_mq4c, HdrMq4c)
#endif
#endif
