// Engine-style atomic-free MoE down GEMV (hqval test tree, written for the suite): the
// product of each (token, rank) pair, W_e[m] . x[token][rank] with e = topk[token][rank],
// to its own row of out [N][k_top][M] (a separate combine would apply the routing
// weights); grid (ceil(M/4), k_top, N), four rows per block.  In qt=6 and qt=44, and a
// broken copy that reads the token's first activation row for every rank.
//   EW_V2      0: qt=6 f32 (scale, zero) at [0..8); 1: qt=44 fp16 pairs per half
//   EW_RANK0_X 1: every rank's product from the activations of rank 0
#include <hip/hip_runtime.h>
#include <hip/hip_fp16.h>

#ifndef EW_V2
#define EW_V2 1
#endif
#ifndef EW_RANK0_X
#define EW_RANK0_X 0
#endif

static __device__ __forceinline__ float ew_down_group(const char* gp, const float* x,
                                                      int lane) {
    const int boff = lane * 4;
#if EW_V2
    const unsigned int h0 = EW_LOAD_HDR(gp);
    const unsigned int h1 = EW_LOAD_HDR(gp + 4);
    const unsigned int h = (boff < 64) ? h0 : h1;  // from the payload offset
    const float sc = __half2float(__ushort_as_half((unsigned short)(h & 0xFFFFu)));
    const float zp = __half2float(__ushort_as_half((unsigned short)(h >> 16)));
#else
    const float sc = __builtin_bit_cast(float, EW_LOAD_HDR(gp));
    const float zp = __builtin_bit_cast(float, EW_LOAD_HDR(gp + 4));
#endif
    const unsigned int pk = EW_LOAD_PK(gp + 8 + boff);
    float part = 0.0f;
#pragma unroll
    for (int i = 0; i < 8; ++i) part += (sc * (float)((pk >> (4 * i)) & 0xFu) + zp) * x[lane * 8 + i];
    return part;
}

__launch_bounds__(32, 16)
extern "C" __global__ void EW_DOWN_NAME(const unsigned long long* __restrict__ expert_ptrs,
                                        const int* __restrict__ topk_indices,
                                        const float* __restrict__ rot_batch,
                                        float* __restrict__ expert_outputs,
                                        int M, int K, int k_top) {
    const int row0 = blockIdx.x * 4, rank = blockIdx.y, token = blockIdx.z;
    const int lane = threadIdx.x;
    if (row0 >= M) return;
    const int slot = token * k_top + rank;
    const char* W = reinterpret_cast<const char*>(expert_ptrs[topk_indices[slot]]);
#if EW_RANK0_X
    const float* x = rot_batch + (long long)(token * k_top) * K;
#else
    const float* x = rot_batch + (long long)slot * K;
#endif
    const int groups = K / 256;
    for (int i = 0; i < 4 && row0 + i < M; ++i) {
        const char* wrow = W + (long long)(row0 + i) * EW_ROW_BYTES(groups);
        float acc = 0.0f;
        for (int g = 0; g < groups; ++g)
            acc += ew_down_group(wrow + g * EW_GROUP_BYTES, x + g * 256, lane);
        for (int off = 16; off > 0; off >>= 1) acc += __shfl_xor(acc, off);
        if (lane == 0) expert_outputs[(long long)slot * M + row0 + i] = acc;
    }
}
