// DELIBERATELY BROKEN decode GEMVs for the launch-guard tests (tests/checks/test_launch.py):
// each computes the right y with the suite's qt=6 body and then makes one stray store that
// the 256 B output sentinels of earlier versions did not see.  Never dispatch them.
#include "hq4_gemv.h"

// After the last block has used x, its lane 0 overwrites x[K-1]: a store into a const
// input (the ABI's x is read-only).  The outputs stay exactly right.
HQ_GLOBAL void HQ_GEMV_BOUNDS gemv_writes_x_r1(const unsigned char* __restrict__ W,
                                               const float* __restrict__ x,
                                               float* __restrict__ y, int M, int K) {
    gemv_rows<HdrHfq4v1, 1, false>(W, x, y, M, K, hq_block_x());
    if (hq_block_x() == static_cast<unsigned int>(M - 1) && hq_lane() == 0) {
        const_cast<float*>(x)[K - 1] = 0.5f;
    }
}

// Block 0's lane 0 stores 1 KiB below y (y[-256]): a negative row index, the classic
// off-by-a-tile pointer.  The outputs stay exactly right.
HQ_GLOBAL void HQ_GEMV_BOUNDS gemv_writes_below_y_r1(const unsigned char* __restrict__ W,
                                                     const float* __restrict__ x,
                                                     float* __restrict__ y, int M, int K) {
    gemv_rows<HdrHfq4v1, 1, false>(W, x, y, M, K, hq_block_x());
    if (hq_block_x() == 0 && hq_lane() == 0) {
        y[-256] = 0.5f;
    }
}
