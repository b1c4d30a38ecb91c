// Private (scratch) memory: a dynamically indexed local array lives in each lane's private
// segment (scratch_load/store on gfx11+).
extern "C" __attribute__((global)) void priv(const int* idx, float* out) {
  unsigned t = __builtin_amdgcn_workitem_id_x();
  float arr[40];
  for (int i = 0; i < 40; ++i) arr[i] = (float)(i * (int)t);
  arr[idx[t] % 40] += 1.0f;
  out[t] = arr[(idx[t] * 7) % 40];
}
