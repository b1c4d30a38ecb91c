// gfx11 family variant: gfx1100 has a chip variant, so only gfx1101/1102/115x use this.
#define TREE_VARIANT 11
#include "gemv_tree.hip"
