// Engine-style decode GEMV, qt=6 HFQ4G256 (hqval test tree, written for the suite).
// One wave32 per output row; lane t owns payload dword t of every group (weights 8t..8t+7).
// Header: f32 scale [0..4), f32 zero [4..8), read from lane-invariant addresses.
// EW_ROW_BYTES / EW_LOAD_* come from the pre-included ew_weight_policy.inc.
#include <hip/hip_runtime.h>
#include <hip/hip_fp16.h>

template <bool RESIDUAL>
static __device__ __forceinline__ void ew_gemv_v1(const char* __restrict__ W,
                                                  const float* __restrict__ x,
                                                  float* __restrict__ y, int M, int K) {
    const int row = blockIdx.x;
    if (row >= M) return;
    const int lane = threadIdx.x;
    const int groups = K / 256;
    const char* wrow = W + (long long)row * EW_ROW_BYTES(groups);
    const int boff = lane * 4;
    float acc_even = 0.0f, acc_odd = 0.0f;
    for (int g = 0; g < groups; ++g) {
        const char* gp = wrow + g * EW_GROUP_BYTES;
        const float sc = __uint_as_float(EW_LOAD_HDR(gp));
        const float zp = __uint_as_float(EW_LOAD_HDR(gp + 4));
        const unsigned int pk = EW_LOAD_PK(gp + 8 + boff);
        const float4 xa = *reinterpret_cast<const float4*>(x + g * 256 + lane * 8);
        const float4 xb = *reinterpret_cast<const float4*>(x + g * 256 + lane * 8 + 4);
        float part = (sc * (float)(pk & 0xFu) + zp) * xa.x;
        part += (sc * (float)((pk >> 4) & 0xFu) + zp) * xa.y;
        part += (sc * (float)((pk >> 8) & 0xFu) + zp) * xa.z;
        part += (sc * (float)((pk >> 12) & 0xFu) + zp) * xa.w;
        part += (sc * (float)((pk >> 16) & 0xFu) + zp) * xb.x;
        part += (sc * (float)((pk >> 20) & 0xFu) + zp) * xb.y;
        part += (sc * (float)((pk >> 24) & 0xFu) + zp) * xb.z;
        part += (sc * (float)((pk >> 28) & 0xFu) + zp) * xb.w;
        if (g & 1) acc_odd += part; else acc_even += part;
    }
    float acc = acc_even + acc_odd;
    for (int off = 16; off > 0; off >>= 1) acc += __shfl_xor(acc, off);
    if (lane == 0) y[row] = RESIDUAL ? y[row] + acc : acc;
}

__launch_bounds__(32, 16)
extern "C" __global__ void ew_gemv_hfq4g256(const char* __restrict__ W, const float* __restrict__ x,
                                            float* __restrict__ y, int M, int K) {
    ew_gemv_v1<false>(W, x, y, M, K);
}

__launch_bounds__(32, 16)
extern "C" __global__ void ew_gemv_hfq4g256_residual(const char* __restrict__ W,
                                                     const float* __restrict__ x,
                                                     float* __restrict__ y, int M, int K) {
    ew_gemv_v1<true>(W, x, y, M, K);
}
