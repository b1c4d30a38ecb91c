// Engine-style decode GEMV for the schema-2 tests: qt=6 through the suite's body, a scale
// from the preincluded policy.inc, and three trailing arguments after the ABI's (an unused
// bias pointer, an f32 and an i32) that must arrive exactly as the manifest's extra_args
// say (null, 1.0, 7); any other value leaves y unwritten, which the NaN guard fails.
#include "hq4_gemv.h"

#ifndef TREE_POLICY_SCALE
#error "policy.inc was not preincluded"
#endif
#ifndef TREE_VARIANT
#define TREE_VARIANT 0
#endif

struct HdrTree : HdrHfq4v1 {
    static HQ_DEVICE void decode(Hq4Raw h, unsigned int boff, float& sc, float& zp) {
        HdrHfq4v1::decode(h, boff, sc, zp);
        sc *= TREE_POLICY_SCALE;
    }
};

HQ_GLOBAL void HQ_GEMV_BOUNDS gemv_tree_r1(
        const unsigned char* __restrict__ W, const float* __restrict__ x,
        float* __restrict__ y, int M, int K, const float* bias, float alpha, int tag) {
    if (bias != nullptr || alpha != 1.0f || tag != 7) return;
    gemv_rows<HdrTree, 1, false>(W, x, y, M, K, hq_block_x());
}
