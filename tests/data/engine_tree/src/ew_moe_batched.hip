// Engine-style batched MoE gate/up GEMV (hqval test tree, written for the suite): N tokens
// at once, grid (M, k_top, N), one block per expert row (rows 0..M/2 gate, M/2..M up) per
// (token, rank) slot, y_gate/y_up [N][k_top][M/2].  An expert routed by several slots is
// read once per slot.
//   EW_V2         0: qt=6 f32 (scale, zero) at [0..8); 1: qt=44 fp16 pairs per half
//   EW_EXTRA_VALU 1: ten dependent multiplies of the scale per group (extra work per group)
#include <hip/hip_runtime.h>
#include <hip/hip_fp16.h>

#ifndef EW_V2
#define EW_V2 1
#endif
#ifndef EW_EXTRA_VALU
#define EW_EXTRA_VALU 0
#endif

static __device__ __forceinline__ float ew_bgroup(const char* gp, const float* x, int lane) {
    const int boff = lane * 4;
#if EW_V2
    const unsigned int h0 = EW_LOAD_HDR(gp);
    const unsigned int h1 = EW_LOAD_HDR(gp + 4);
    const unsigned int h = (boff < 64) ? h0 : h1;
    float sc = __half2float(__ushort_as_half((unsigned short)(h & 0xFFFFu)));
    const float zp = __half2float(__ushort_as_half((unsigned short)(h >> 16)));
#else
    float sc = __builtin_bit_cast(float, EW_LOAD_HDR(gp));
    const float zp = __builtin_bit_cast(float, EW_LOAD_HDR(gp + 4));
#endif
#if EW_EXTRA_VALU
#pragma unroll
    for (int i = 0; i < 10; ++i) sc = sc * 1.0000001f;
#endif
    const unsigned int pk = EW_LOAD_PK(gp + 8 + boff);
    float part = 0.0f;
#pragma unroll
    for (int i = 0; i < 8; ++i) part += (sc * (float)((pk >> (4 * i)) & 0xFu) + zp) * x[lane * 8 + i];
    return part;
}

__launch_bounds__(32, 16)
extern "C" __global__ void EW_BATCHED_NAME(const unsigned long long* __restrict__ expert_ptrs,
                                           const int* __restrict__ topk_indices,
                                           const float* __restrict__ x,
                                           float* __restrict__ y_gate, float* __restrict__ y_up,
                                           int M, int K, int K_TOP) {
    const int row = blockIdx.x, rank = blockIdx.y, token = blockIdx.z, lane = threadIdx.x;
    if (row >= M) return;
    const int expert = topk_indices[token * K_TOP + rank];
    const char* W = reinterpret_cast<const char*>(expert_ptrs[expert]);
    const float* xr = x + (long long)token * K;
    const int groups = K / 256;
    const char* wrow = W + (long long)row * EW_ROW_BYTES(groups);
    float acc = 0.0f;
    for (int g = 0; g < groups; ++g) acc += ew_bgroup(wrow + g * EW_GROUP_BYTES, xr + g * 256, lane);
    for (int off = 16; off > 0; off >>= 1) acc += __shfl_xor(acc, off);
    if (lane == 0) {
        const int mi = M >> 1;
        const long long out = ((long long)token * K_TOP + rank) * mi;
        if (row < mi) y_gate[out + row] = acc;
        else y_up[out + row - mi] = acc;
    }
}
