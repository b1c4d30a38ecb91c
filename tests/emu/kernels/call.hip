// A non-inlined device function with a private array: s_getpc/s_swappc/s_setpc calls and
// a scratch stack.
#define KERNEL extern "C" __attribute__((global))
__attribute__((noinline, device)) float helper(float a, float b, int k) {
  float arr[16];
  for (int i = 0; i < 16; ++i) arr[i] = a * i + b;
  return arr[k & 15] * 2.0f;
}
KERNEL void caller(const float* a, float* out) {
  unsigned t = __builtin_amdgcn_workitem_id_x();
  out[t] = helper(a[t], 1.0f, (int)t) + helper(a[t], 2.0f, (int)t + 3);
}
