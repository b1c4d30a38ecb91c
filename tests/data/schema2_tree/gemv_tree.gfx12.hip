// The gfx12 family variant (name.gfx12.hip): the same kernel, tagged.
#define TREE_VARIANT 12
#include "gemv_tree.hip"
