// The read floor of a timing cell: every 16-byte word of a buffer read exactly once,
// grid-stride, four loads in flight per thread, nothing else.  A GEMV that has to read the
// same weight bytes is not expected to run faster than this on the same device in the same
// run (a plain read, not a proven bound), so `hqval bench` reports each cell's time against
// it (hqval/timing/baselines.py) beside the 1 GiB copy bandwidth, which a read of tens of
// MB does not reach.
//
// NAME(const words* p, int n16, unsigned int* out, int threads): thread i of `threads`
// (grid.x = threads / 256, block 256) XORs words i, i + threads, ... into out[i], so the
// loads cannot be dropped and the result can be checked (4 bytes written per >= 256 read).
#include "hqval_prelude.h"

#if defined(HQ_CUDA)
typedef uint4 hq_u32x4;
#else
typedef unsigned int hq_u32x4 __attribute__((ext_vector_type(4)));
#endif

HQ_GLOBAL void HQ_LAUNCH_BOUNDS(256) hqval_stream_read(const hq_u32x4* __restrict__ p, int n16,
                                                       unsigned int* __restrict__ out,
                                                       int threads) {
    const int tid = static_cast<int>(hq_block_x() * 256u + hq_lane());
    unsigned int acc = 0u;
    int i = tid;
    for (; i + 3 * threads < n16; i += 4 * threads) {
        const hq_u32x4 a = p[i], b = p[i + threads], c = p[i + 2 * threads],
                       d = p[i + 3 * threads];
        acc ^= (a.x ^ a.y ^ a.z ^ a.w) ^ (b.x ^ b.y ^ b.z ^ b.w) ^ (c.x ^ c.y ^ c.z ^ c.w) ^
               (d.x ^ d.y ^ d.z ^ d.w);
    }
    for (; i < n16; i += threads) {
        const hq_u32x4 a = p[i];
        acc ^= a.x ^ a.y ^ a.z ^ a.w;
    }
    if (tid < threads) out[tid] = acc;
}
