// Raw buffer loads/stores through a buffer resource: lanes past num_records read 0 and
// their stores are dropped (the hardware bounds check).
#define KERNEL extern "C" __attribute__((global))
KERNEL void bufk(const float* a, float* out, float* seen, int n) {
  unsigned t = __builtin_amdgcn_workitem_id_x();
  __amdgpu_buffer_rsrc_t r = __builtin_amdgcn_make_buffer_rsrc((void*)a, 0, n * 4, 0x31014000);
  __amdgpu_buffer_rsrc_t w = __builtin_amdgcn_make_buffer_rsrc((void*)out, 0, n * 4, 0x31014000);
  float v = __builtin_bit_cast(float, __builtin_amdgcn_raw_buffer_load_b32(r, t * 4, 0, 0));
  __builtin_amdgcn_raw_buffer_store_b32(__builtin_bit_cast(unsigned, v * 2.0f), w, t * 4, 0, 0);
  seen[t] = v;  // what the load returned, in range or not
}
