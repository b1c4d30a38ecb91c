// Deliberately broken copies of the engine-style kernels (the tree's own mutants.yaml):
// each differs from its real kernel in one place, and `hqval run` must reject it with the
// failing check named.
#include <hip/hip_runtime.h>
#include <hip/hip_fp16.h>
#include "ew_decode.h"

typedef _Float16 ew_h16 __attribute__((ext_vector_type(16)));
typedef _Float16 ew_h8 __attribute__((ext_vector_type(8)));
typedef float ew_f8 __attribute__((ext_vector_type(8)));

// GEMV decode with a switchable defect.  LANE_HALF: the half taken from the lane id
// (lane < 8) instead of the payload offset.  PAY4: the payload read at +4.  LANE_HDR: the
// header word at a lane-dependent address (lanes 16.. read +4).  STRIDE: the group stride
// in bytes (132: the retired compact layout).  EXTRA: a second, redundant dequantisation
// per group (extra work; the result is the same).  H selects the header decoder, so a v1
// decoder (EW_F32) on a v2 kernel reads v2's fp16 pairs as f32.
template <int H, bool LANE_HALF, bool PAY4, bool LANE_HDR = false, int STRIDE = EW_GROUP_BYTES,
          bool EXTRA = false>
static __device__ __forceinline__ void ew_gemv_broken(const char* __restrict__ W,
                                                      const float* __restrict__ x,
                                                      float* __restrict__ y, int M, int K) {
    const int row = blockIdx.x;
    if (row >= M) return;
    const int lane = threadIdx.x;
    const int groups = K / 256;
    const char* wrow = W + (long long)row * EW_ROW_BYTES(groups);
    const int boff = lane * 4;
    float acc = 0.0f;
    for (int g = 0; g < groups; ++g) {
        const char* gp = wrow + g * STRIDE;
        float sc, zp;
        if (LANE_HDR) {
            const unsigned int h = EW_LOAD_HDR(gp + (lane < 16 ? 0 : 4));
            sc = __half2float(__ushort_as_half((unsigned short)(h & 0xFFFFu)));
            zp = __half2float(__ushort_as_half((unsigned short)(h >> 16)));
        } else {
            ew_header<H>(gp, LANE_HALF ? (lane < 8 ? 0 : 64) : boff, sc, zp);
        }
        const unsigned int pk = EW_LOAD_PK(gp + (PAY4 ? 4 : 8) + boff);
        const float4 xa = *reinterpret_cast<const float4*>(x + g * 256 + lane * 8);
        const float4 xb = *reinterpret_cast<const float4*>(x + g * 256 + lane * 8 + 4);
        float part = ew_dot8(pk, sc, zp, xa, xb);
        if (EXTRA) {
            // the same dot product again from a negated copy, added and taken away
            const float4 na = {-xa.x, -xa.y, -xa.z, -xa.w};
            const float4 nb = {-xb.x, -xb.y, -xb.z, -xb.w};
            const float twice = part - ew_dot8(pk, sc, zp, na, nb);
            part = 0.5f * twice;
        }
        acc += part;
    }
    for (int off = 16; off > 0; off >>= 1) acc += __shfl_xor(acc, off);
    if (lane == 0) y[row] = acc;
}

__launch_bounds__(32, 16)
extern "C" __global__ void ew_mut_gemv_lane_header(const char* __restrict__ W,
                                                   const float* __restrict__ x,
                                                   float* __restrict__ y, int M, int K) {
    ew_gemv_broken<EW_V2, false, false, true>(W, x, y, M, K);
}

__launch_bounds__(32, 16)
extern "C" __global__ void ew_mut_gemv_stride132(const char* __restrict__ W,
                                                 const float* __restrict__ x,
                                                 float* __restrict__ y, int M, int K) {
    ew_gemv_broken<EW_V2, false, false, false, 132>(W, x, y, M, K);
}

__launch_bounds__(32, 16)
extern "C" __global__ void ew_mut_gemv_extra_work(const char* __restrict__ W,
                                                  const float* __restrict__ x,
                                                  float* __restrict__ y, int M, int K) {
    ew_gemv_broken<EW_V2, false, false, false, EW_GROUP_BYTES, true>(W, x, y, M, K);
}

__launch_bounds__(32, 16)
extern "C" __global__ void ew_mut_gemv_v1_header(const char* __restrict__ W,
                                                 const float* __restrict__ x,
                                                 float* __restrict__ y, int M, int K) {
    ew_gemv_broken<EW_F32, false, false>(W, x, y, M, K);
}

__launch_bounds__(32, 16)
extern "C" __global__ void ew_mut_gemv_lane_half(const char* __restrict__ W,
                                                 const float* __restrict__ x,
                                                 float* __restrict__ y, int M, int K) {
    ew_gemv_broken<EW_V2, true, false>(W, x, y, M, K);
}

__launch_bounds__(32, 16)
extern "C" __global__ void ew_mut_gemv_mq4c_payload_at4(const char* __restrict__ W,
                                                        const float* __restrict__ x,
                                                        float* __restrict__ y, int M, int K) {
    ew_gemv_broken<EW_C, false, true>(W, x, y, M, K);
}

#if defined(__GFX12__)
// gfx12 GEMM whose row base folds +4 instead of +8: every payload dword read 4 bytes early.
extern "C" __launch_bounds__(32) __global__ void ew_mut_gemm12_payload_base4(
    const char* __restrict__ W, const _Float16* __restrict__ X, float* __restrict__ Y,
    int M, int K, int N) {
    const int m0 = blockIdx.x * 16;
    const int n0 = blockIdx.y * 16;
    const int lane = threadIdx.x;
    const int r = lane & 15;
    const int kofs = 8 * (lane >> 4);
    const int groups = K / 256;
    const int my_row = (m0 + r < M) ? m0 + r : M - 1;
    const int my_tok = (n0 + r < N) ? n0 + r : N - 1;
    const char* wrow = W + (long long)my_row * EW_ROW_BYTES(groups);
    const char* pay = wrow + 4 + 4 * (lane >> 4);
    const _Float16* xrow = X + (long long)my_tok * K + kofs;
    ew_f8 acc = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
    for (int g = 0; g < groups; ++g) {
        const char* gp = wrow + g * EW_GROUP_BYTES;
        float sc0, zp0, sc1, zp1;
        ew_header<EW_V2>(gp, 0, sc0, zp0);
        ew_header<EW_V2>(gp, 64, sc1, zp1);
        #pragma unroll
        for (int kt = 0; kt < 16; ++kt) {
            const float sc = kt < 8 ? sc0 : sc1;
            const float zp = kt < 8 ? zp0 : zp1;
            const unsigned int w = EW_LOAD_PK(pay + g * EW_GROUP_BYTES + kt * 8);
            ew_h8 a;
            #pragma unroll
            for (int j = 0; j < 8; ++j)
                a[j] = (_Float16)(sc * (float)((w >> (4 * j)) & 0xFu) + zp);
            const ew_h8 b = *reinterpret_cast<const ew_h8*>(xrow + g * 256 + kt * 16);
            acc = __builtin_amdgcn_wmma_f32_16x16x16_f16_w32_gfx12(a, b, acc);
        }
    }
    const int n = n0 + r;
    #pragma unroll
    for (int i = 0; i < 8; ++i) {
        const int m = m0 + i + 8 * (lane >> 4);
        if (m < M && n < N) Y[(long long)n * M + m] = acc[i];
    }
}
#endif

#if defined(__GFX11__)
// gfx11 GEMM with the halves' headers swapped (k-tiles 0..7 take half 1's scale/zero).
extern "C" __launch_bounds__(32, 2) __global__ void ew_mut_gemm11_halves_swapped(
    const char* __restrict__ W, const _Float16* __restrict__ X, float* __restrict__ Y,
    int M, int K, int N) {
    const int m0 = blockIdx.x * 16;
    const int n0 = blockIdx.y * 16;
    const int lane = threadIdx.x;
    const int r = lane & 15;
    const int groups = K / 256;
    const int my_row = (m0 + r < M) ? m0 + r : M - 1;
    const int my_tok = (n0 + r < N) ? n0 + r : N - 1;
    const char* wrow = W + (long long)my_row * EW_ROW_BYTES(groups);
    const _Float16* xrow = X + (long long)my_tok * K;
    ew_f8 acc = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
    for (int g = 0; g < groups; ++g) {
        const char* gp = wrow + g * EW_GROUP_BYTES;
        float sc0, zp0, sc1, zp1;
        ew_header<EW_V2>(gp, 0, sc0, zp0);
        ew_header<EW_V2>(gp, 64, sc1, zp1);
        const _Float16 hs0 = (_Float16)sc0, hz0 = (_Float16)zp0;
        const _Float16 hs1 = (_Float16)sc1, hz1 = (_Float16)zp1;
        #pragma unroll
        for (int kt = 0; kt < 16; ++kt) {
            const _Float16 hs = kt < 8 ? hs1 : hs0;
            const _Float16 hz = kt < 8 ? hz1 : hz0;
            const unsigned int lo = EW_LOAD_PK(gp + 8 + kt * 8);
            const unsigned int hi = EW_LOAD_PK(gp + 12 + kt * 8);
            ew_h16 a;
            #pragma unroll
            for (int j = 0; j < 8; ++j) {
                a[j] = hs * (_Float16)((lo >> (4 * j)) & 0xFu) + hz;
                a[j + 8] = hs * (_Float16)((hi >> (4 * j)) & 0xFu) + hz;
            }
            const ew_h16 b = *reinterpret_cast<const ew_h16*>(xrow + g * 256 + kt * 16);
            acc = __builtin_amdgcn_wmma_f32_16x16x16_f16_w32(a, b, acc);
        }
    }
    const int n = n0 + r;
    #pragma unroll
    for (int i = 0; i < 8; ++i) {
        const int m = m0 + 2 * i + (lane >> 4);
        if (m < M && n < N) Y[(long long)n * M + m] = acc[i];
    }
}
#endif
