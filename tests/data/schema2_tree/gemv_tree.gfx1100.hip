// The gfx1100 chip variant (name.gfx1100.hip): wins over a family variant on gfx1100.
#define TREE_VARIANT 1100
#include "gemv_tree.hip"
