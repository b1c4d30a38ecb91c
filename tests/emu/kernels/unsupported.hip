// A kernel with an instruction the interpreter does not model (s_getreg_b32, a read of
// a hardware register): the launch must stop with UnsupportedInstruction, never skip it.
extern "C" __attribute__((global)) void reads_mode_register(unsigned* out) {
  unsigned mode = __builtin_amdgcn_s_getreg(1);  // hwreg(HW_REG_MODE)
  out[__builtin_amdgcn_workitem_id_x()] = mode + 1;
}
