// Engine-style decode GEMV siblings that unroll differently (hqval test tree): the v1
// kernel walks the groups in blocks of four with an inner loop it keeps rolled (a loop nest
// of two), the v2 kernel has one group loop unrolled by four.  One wave32 per row; lane t
// owns payload dword t of every group.  Their loop bodies are not comparable; what they
// execute per group-row is.
#include <hip/hip_runtime.h>
#include <hip/hip_fp16.h>
#include "ew_decode.h"

__launch_bounds__(32, 16)
extern "C" __global__ void ew_gemv_hfq4g256_nest(const char* __restrict__ W,
                                                 const float* __restrict__ x,
                                                 float* __restrict__ y, int M, int K) {
    const int row = blockIdx.x;
    if (row >= M) return;
    const int lane = threadIdx.x;
    const int groups = K / 256;
    const char* wrow = W + (long long)row * EW_ROW_BYTES(groups);
    const int boff = lane * 4;
    float acc = 0.0f;
    for (int g0 = 0; g0 < groups; g0 += 4) {
        const int n = groups - g0 < 4 ? groups - g0 : 4;
        #pragma nounroll
        for (int u = 0; u < n; ++u) {
            const int g = g0 + u;
            const char* gp = wrow + g * EW_GROUP_BYTES;
            float sc, zp;
            ew_header<EW_F32>(gp, boff, sc, zp);
            const unsigned int pk = EW_LOAD_PK(gp + 8 + boff);
            const float4 xa = *reinterpret_cast<const float4*>(x + g * 256 + lane * 8);
            const float4 xb = *reinterpret_cast<const float4*>(x + g * 256 + lane * 8 + 4);
            acc += ew_dot8(pk, sc, zp, xa, xb);
        }
    }
    for (int off = 16; off > 0; off >>= 1) acc += __shfl_xor(acc, off);
    if (lane == 0) y[row] = acc;
}

template <int H>
static __device__ __forceinline__ void ew_gemv_unrolled(const char* __restrict__ W,
                                                        const float* __restrict__ x,
                                                        float* __restrict__ y, int M, int K) {
    const int row = blockIdx.x;
    if (row >= M) return;
    const int lane = threadIdx.x;
    const int groups = K / 256;
    const char* wrow = W + (long long)row * EW_ROW_BYTES(groups);
    const int boff = lane * 4;
    float acc = 0.0f;
    #pragma unroll 4
    for (int g = 0; g < groups; ++g) {
        const char* gp = wrow + g * EW_GROUP_BYTES;
        float sc, zp;
        ew_header<H>(gp, boff, sc, zp);
        const unsigned int pk = EW_LOAD_PK(gp + 8 + boff);
        const float4 xa = *reinterpret_cast<const float4*>(x + g * 256 + lane * 8);
        const float4 xb = *reinterpret_cast<const float4*>(x + g * 256 + lane * 8 + 4);
        acc += ew_dot8(pk, sc, zp, xa, xb);
    }
    for (int off = 16; off > 0; off >>= 1) acc += __shfl_xor(acc, off);
    if (lane == 0) y[row] = acc;
}

__launch_bounds__(32, 16)
extern "C" __global__ void ew_gemv_mq4g256v2_unroll4(const char* __restrict__ W,
                                                     const float* __restrict__ x,
                                                     float* __restrict__ y, int M, int K) {
    ew_gemv_unrolled<EW_V2>(W, x, y, M, K);
}
