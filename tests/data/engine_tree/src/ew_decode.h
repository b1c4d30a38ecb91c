// Header decoders of the engine-style test tree: each gives (scale, zero) for the lane whose
// payload byte offset in the group is `boff` (0..127).  F32: qt=6/13, V2: qt=44 (half from
// the payload offset: bytes 0..63 are weights 0..127), C: qt=45 (one pair + zero pad).
#ifndef EW_DECODE_H
#define EW_DECODE_H
#include <hip/hip_fp16.h>

enum EwHeader { EW_F32 = 0, EW_V2 = 1, EW_C = 2 };

template <int H>
static __device__ __forceinline__ void ew_header(const char* gp, int boff, float& sc, float& zp) {
    if (H == EW_F32) {
        sc = __uint_as_float(EW_LOAD_HDR(gp));
        zp = __uint_as_float(EW_LOAD_HDR(gp + 4));
    } else {
        unsigned int h = EW_LOAD_HDR(gp);
        if (H == EW_V2) {
            const unsigned int h1 = EW_LOAD_HDR(gp + 4);
            h = (boff < 64) ? h : h1;
        }
        sc = __half2float(__ushort_as_half((unsigned short)(h & 0xFFFFu)));
        zp = __half2float(__ushort_as_half((unsigned short)(h >> 16)));
    }
}

// One lane's eight weights of a group against its eight x values.
static __device__ __forceinline__ float ew_dot8(unsigned int pk, float sc, float zp, float4 xa,
                                                float4 xb) {
    float part = (sc * (float)(pk & 0xFu) + zp) * xa.x;
    part += (sc * (float)((pk >> 4) & 0xFu) + zp) * xa.y;
    part += (sc * (float)((pk >> 8) & 0xFu) + zp) * xa.z;
    part += (sc * (float)((pk >> 12) & 0xFu) + zp) * xa.w;
    part += (sc * (float)((pk >> 16) & 0xFu) + zp) * xb.x;
    part += (sc * (float)((pk >> 20) & 0xFu) + zp) * xb.y;
    part += (sc * (float)((pk >> 24) & 0xFu) + zp) * xb.z;
    part += (sc * (float)((pk >> 28) & 0xFu) + zp) * xb.w;
    return part;
}
#endif  // EW_DECODE_H
