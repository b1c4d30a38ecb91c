// Engine-style dual-row residual decode GEMV, qt=44 (hqval test tree): one wave32 owns two
// adjacent output rows (y[row] += W[row] . x), loading the header words of both rows from
// lane-invariant addresses and one payload dword per lane and row.  A pass of its group
// loop therefore reads two rows' payload where the one-row v1 residual GEMV reads one:
// W traffic compares per group-row, not per pass.  EW_LANE_HEADER (a broken copy) reads
// each row's header word at a lane-dependent address instead.
#include <hip/hip_runtime.h>
#include <hip/hip_fp16.h>
#include "ew_decode.h"

#ifndef EW_DUALROW_NAME
#define EW_DUALROW_NAME ew_gemv_mq4g256v2_dualrow_residual
#endif

static __device__ __forceinline__ void ew_v2_header(const char* gp, int lane, float& sc,
                                                    float& zp) {
#ifdef EW_LANE_HEADER
    const unsigned int h = EW_LOAD_PK(gp + (lane < 16 ? 0 : 4));
#else
    const unsigned int h0 = EW_LOAD_HDR(gp);
    const unsigned int h1 = EW_LOAD_HDR(gp + 4);
    const unsigned int h = lane < 16 ? h0 : h1;  // lane t owns payload bytes 4t..4t+3
#endif
    sc = __half2float(__ushort_as_half((unsigned short)(h & 0xFFFFu)));
    zp = __half2float(__ushort_as_half((unsigned short)(h >> 16)));
}

__launch_bounds__(32, 16)
extern "C" __global__ void EW_DUALROW_NAME(const char* __restrict__ W,
                                           const float* __restrict__ x,
                                           float* __restrict__ y, int M, int K) {
    const int row0 = blockIdx.x * 2;
    if (row0 >= M) return;
    const bool two = row0 + 1 < M;
    const int lane = threadIdx.x;
    const int groups = K / 256;
    const char* w0 = W + (long long)row0 * EW_ROW_BYTES(groups);
    const char* w1 = W + (long long)(two ? row0 + 1 : row0) * EW_ROW_BYTES(groups);
    const int boff = lane * 4;
    // the v1 GEMV's order: even and odd groups summed apart, then added
    float e0 = 0.0f, o0 = 0.0f, e1 = 0.0f, o1 = 0.0f;
    for (int g = 0; g < groups; ++g) {
        const float4 xa = *reinterpret_cast<const float4*>(x + g * 256 + lane * 8);
        const float4 xb = *reinterpret_cast<const float4*>(x + g * 256 + lane * 8 + 4);
        float sc0, zp0, sc1, zp1;
        ew_v2_header(w0 + g * EW_GROUP_BYTES, lane, sc0, zp0);
        ew_v2_header(w1 + g * EW_GROUP_BYTES, lane, sc1, zp1);
        const unsigned int pk0 = EW_LOAD_PK(w0 + g * EW_GROUP_BYTES + 8 + boff);
        const unsigned int pk1 = EW_LOAD_PK(w1 + g * EW_GROUP_BYTES + 8 + boff);
        const float p0 = ew_dot8(pk0, sc0, zp0, xa, xb);
        const float p1 = ew_dot8(pk1, sc1, zp1, xa, xb);
        if (g & 1) { o0 += p0; o1 += p1; } else { e0 += p0; e1 += p1; }
    }
    float a0 = e0 + o0, a1 = e1 + o1;
    for (int off = 16; off > 0; off >>= 1) {
        a0 += __shfl_xor(a0, off);
        a1 += __shfl_xor(a1, off);
    }
    if (lane == 0) {
        y[row0] = y[row0] + a0;
        if (two) y[row0 + 1] = y[row0 + 1] + a1;
    }
}
