// Engine-style routed and fused decode GEMVs (hqval test tree, written for the suite):
// an indexed MoE gate/up GEMV (a table of expert weight pointers, top-k indices, grid.y =
// the rank, y_gate/y_up [k_top][M/2]) and a fused gate/up GEMV (two matrices, grid
// gate_m + up_m), each in qt=6 and qt=44 and, for the MoE one, a broken copy whose header
// dword is read at a lane-dependent address (hoff = lane < 16 ? 0 : 4: one vector load in
// place of two scalar ones, against the design note's section 4).
//   EW_V2       0: qt=6 f32 (scale, zero) at [0..8); 1: qt=44 fp16 pairs per half
//   EW_LANE_HDR 1: the qt=44 header read through the lane-dependent offset
//   EW_LDS_X    1: the MoE GEMV stages x in LDS and reads it through a generic pointer
//               (x or the LDS copy, chosen at run time: flat loads into the shared aperture)
#include <hip/hip_runtime.h>
#include <hip/hip_fp16.h>

#ifndef EW_V2
#define EW_V2 1
#endif
#ifndef EW_LANE_HDR
#define EW_LANE_HDR 0
#endif
#ifndef EW_LDS_X
#define EW_LDS_X 0
#endif

static __device__ __forceinline__ float ew_group(const char* gp, const float* x, int lane) {
    const int boff = lane * 4;
#if EW_V2 && EW_LANE_HDR
    const int hoff = (lane < 16) ? 0 : 4;  // lane-addressed: one vector load per group
    const unsigned int h = *(const unsigned int*)(gp + hoff);
    const float sc = __half2float(__ushort_as_half((unsigned short)(h & 0xFFFFu)));
    const float zp = __half2float(__ushort_as_half((unsigned short)(h >> 16)));
#elif EW_V2
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

static __device__ __forceinline__ float ew_row(const char* wrow, const float* x, int groups,
                                               int lane) {
    float acc = 0.0f;
    for (int g = 0; g < groups; ++g) acc += ew_group(wrow + g * EW_GROUP_BYTES, x + g * 256, lane);
    for (int off = 16; off > 0; off >>= 1) acc += __shfl_xor(acc, off);
    return acc;
}

__launch_bounds__(32, 16)
extern "C" __global__ void EW_MOE_NAME(const unsigned long long* __restrict__ expert_ptrs,
                                       const int* __restrict__ topk_indices,
                                       const float* __restrict__ x,
                                       float* __restrict__ y_gate, float* __restrict__ y_up,
                                       int M, int K) {
    const int mi = M >> 1;
    const int row = blockIdx.x, rank = blockIdx.y, lane = threadIdx.x;
#if EW_LDS_X
    __shared__ float xs[2048];
    const bool use_lds = K <= 2048;
    if (use_lds) {
        for (int i = lane; i < K; i += 32) xs[i] = x[i];
        __syncthreads();
    }
    const float* xsrc = use_lds ? xs : x;
#else
    const float* xsrc = x;
#endif
    if (row >= mi) return;
    const char* W = reinterpret_cast<const char*>(expert_ptrs[topk_indices[rank]]);
    const int groups = K / 256;
    const float g = ew_row(W + (long long)row * EW_ROW_BYTES(groups), xsrc, groups, lane);
    const float u = ew_row(W + (long long)(row + mi) * EW_ROW_BYTES(groups), xsrc, groups,
                           lane);
    if (lane == 0) {
        y_gate[rank * mi + row] = g;
        y_up[rank * mi + row] = u;
    }
}

__launch_bounds__(32, 16)
extern "C" __global__ void EW_GATE_UP_NAME(const char* __restrict__ A_gate,
                                           const char* __restrict__ A_up,
                                           const float* __restrict__ x,
                                           float* __restrict__ y_gate, float* __restrict__ y_up,
                                           int gate_m, int up_m, int K) {
    const int gid = blockIdx.x, lane = threadIdx.x;
    if (gid >= gate_m + up_m) return;
    const bool gate = gid < gate_m;
    const int row = gate ? gid : gid - gate_m;
    const int groups = K / 256;
    const float acc = ew_row((gate ? A_gate : A_up) + (long long)row * EW_ROW_BYTES(groups), x,
                             groups, lane);
    if (lane == 0) (gate ? y_gate : y_up)[row] = acc;
}
