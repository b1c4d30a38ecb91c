// Decode GEMV for the 136 B / 256-weight family: qt=6 (and qt=13), qt=44, qt=45.
//
// ABI (docs/ARCHITECTURE.md): NAME(const unsigned char* W, const float* x, float* y,
// int M, int K); block 32 (one wave32); grid.x = ceil(M / R); row m of W starts at byte
// m*(K/256)*136; y[m] = sum_k deq(W)[m,k] * x[k]  (residual symbols: y[m] +=).
// Fused QKV: see gemv_qkv_* below.
//
// One body, instantiated once per header decoder (kernels/include/hq4_header.h), so the
// three formats differ only in how the 8 header bytes become (scale, zero).
#include "hq4_gemv.h"

// HQ_GEMV_ONLY restricts the translation unit to one format (a smaller code object);
// by default all three are built.
#if !defined(HQ_GEMV_ONLY) || HQ_GEMV_ONLY == 6
HQ_GEMV_FORMAT(gemv_hfq4g256, HdrHfq4v1)
#endif
#if !defined(HQ_GEMV_ONLY) || HQ_GEMV_ONLY == 44
HQ_GEMV_FORMAT(gemv_mq4g256v2, HdrMq4v2)
#endif
#if !defined(HQ_GEMV_ONLY) || HQ_GEMV_ONLY == 45
HQ_GEMV_FORMAT(gemv_mq4c, HdrMq4c)
#endif
