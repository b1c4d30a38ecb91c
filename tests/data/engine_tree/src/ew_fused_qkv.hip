// Engine-style fused QKV decode GEMV (hqval test tree): Q, K and V projections of one x in
// one launch, one wave32 per output row (grid.x = Mq + Mk + Mv).  With EW_QKV_WITH_BIAS the
// kernel takes three trailing bias pointers after the ABI's arguments; a null pointer means
// no bias for that projection (the suite passes them with manifest `extra_args`).
#include <hip/hip_runtime.h>
#include <hip/hip_fp16.h>
#include "ew_decode.h"

#if defined(EW_QKV_WITH_BIAS)
#define EW_QKV_BIAS_PARAMS , const float* __restrict__ bq, const float* __restrict__ bk, \
                            const float* __restrict__ bv
#define EW_QKV_BIAS_ARGS , bq, bk, bv
#else
#define EW_QKV_BIAS_PARAMS
#define EW_QKV_BIAS_ARGS , nullptr, nullptr, nullptr
#endif

template <int H>
static __device__ __forceinline__ void ew_qkv(
    const char* __restrict__ Wq, const char* __restrict__ Wk, const char* __restrict__ Wv,
    const float* __restrict__ x, float* __restrict__ yq, float* __restrict__ yk,
    float* __restrict__ yv, int Mq, int Mk, int Mv, int K, const float* bq, const float* bk,
    const float* bv) {
    int row = blockIdx.x;
    if (row >= Mq + Mk + Mv) return;
    const char* W = Wq;
    float* y = yq;
    const float* bias = bq;
    if (row >= Mq + Mk) {
        W = Wv; y = yv; bias = bv; row -= Mq + Mk;
    } else if (row >= Mq) {
        W = Wk; y = yk; bias = bk; row -= Mq;
    }
    const int lane = threadIdx.x;
    const int groups = K / 256;
    const char* wrow = W + (long long)row * EW_ROW_BYTES(groups);
    const int boff = lane * 4;
    float acc = 0.0f;
    for (int g = 0; g < groups; ++g) {
        const char* gp = wrow + g * EW_GROUP_BYTES;
        float sc, zp;
        ew_header<H>(gp, boff, sc, zp);
        const unsigned int pk = EW_LOAD_PK(gp + 8 + boff);
        const float4 xa = *reinterpret_cast<const float4*>(x + g * 256 + lane * 8);
        const float4 xb = *reinterpret_cast<const float4*>(x + g * 256 + lane * 8 + 4);
        acc += ew_dot8(pk, sc, zp, xa, xb);
    }
    for (int off = 16; off > 0; off >>= 1) acc += __shfl_down(acc, off);
    if (lane == 0) y[row] = acc + (bias ? bias[row] : 0.0f);
}

#define EW_QKV_ENTRY(NAME, H)                                                               \
    __launch_bounds__(32, 16) extern "C" __global__ void NAME(                              \
        const char* __restrict__ Wq, const char* __restrict__ Wk, const char* __restrict__ Wv, \
        const float* __restrict__ x, float* __restrict__ yq, float* __restrict__ yk,        \
        float* __restrict__ yv, int Mq, int Mk, int Mv, int K EW_QKV_BIAS_PARAMS) {        \
        ew_qkv<H>(Wq, Wk, Wv, x, yq, yk, yv, Mq, Mk, Mv, K EW_QKV_BIAS_ARGS);               \
    }

EW_QKV_ENTRY(ew_fused_qkv_hfq4g256, EW_F32)
EW_QKV_ENTRY(ew_fused_qkv_mq4g256v2, EW_V2)
