// Engine-style qt=44 decode GEMV whose launch bounds ask for a minimum occupancy (hqval
// test tree, written for the suite): __launch_bounds__(32, EW_MIN_WAVES) is HIP's
// amdgpu_waves_per_eu(EW_MIN_WAVES).  The compiler meets a request it can (by limiting
// VGPRs) and warns when it cannot: a request above the arch's wave slots per SIMD (16 on
// gfx1100) is dropped, and a block's LDS can cap the occupancy below the request.
//   EW_MIN_WAVES: the declared minimum waves per execution unit
//   EW_STAGE_X 1: x staged in 8 KB of LDS per one-wave block (at most 4 waves per SIMD)
#include <hip/hip_runtime.h>
#include <hip/hip_fp16.h>

#ifndef EW_STAGE_X
#define EW_STAGE_X 0
#endif

__launch_bounds__(32, EW_MIN_WAVES)
extern "C" __global__ void EW_NAME(const char* __restrict__ W, const float* __restrict__ x,
                                   float* __restrict__ y, int M, int K) {
    const int lane = threadIdx.x;
#if EW_STAGE_X
    __shared__ float xs[2048];
    for (int i = lane; i < K && i < 2048; i += 32) xs[i] = x[i];
    __syncthreads();
    const float* xv = K <= 2048 ? xs : x;
#else
    const float* xv = x;
#endif
    const int row = blockIdx.x;
    if (row >= M) return;
    const int boff = lane * 4;
    const int groups = K / 256;
    const char* wrow = W + (long long)row * EW_ROW_BYTES(groups);
    float acc = 0.0f;
    for (int g = 0; g < groups; ++g) {
        const char* gp = wrow + g * EW_GROUP_BYTES;
        const unsigned int h0 = EW_LOAD_HDR(gp);
        const unsigned int h1 = EW_LOAD_HDR(gp + 4);
        const unsigned int h = (boff < 64) ? h0 : h1;
        const float sc = __half2float(__ushort_as_half((unsigned short)(h & 0xFFFFu)));
        const float zp = __half2float(__ushort_as_half((unsigned short)(h >> 16)));
        const unsigned int pk = EW_LOAD_PK(gp + 8 + boff);
        const float* xg = xv + g * 256 + lane * 8;
#pragma unroll
        for (int i = 0; i < 8; ++i) acc += (sc * (float)((pk >> (4 * i)) & 0xFu) + zp) * xg[i];
    }
    for (int off = 16; off > 0; off >>= 1) acc += __shfl_xor(acc, off);
    if (lane == 0) y[row] = acc;
}
