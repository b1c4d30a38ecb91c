// A kernel with an instruction the interpreter does not model (s_trap): the launch must
// stop with UnsupportedInstruction, never skip it.
extern "C" __attribute__((global)) void uses_trap(unsigned* out) {
  __builtin_trap();
  out[__builtin_amdgcn_workitem_id_x()] = 1;
}
