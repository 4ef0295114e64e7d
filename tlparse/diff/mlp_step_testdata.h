// Test data shared by the alignment and diff tests: the op kinds (signatures numbered in order
// of first appearance) of one training step of a 2-layer MLP, from a recording, and of the same
// step with `loss = loss + 0.0 * out.abs().mean()` added (4 forward ops, the backward's 13 and
// one `add` more). Runs whose steps differ like this drift a step apart under a careless
// alignment.
#pragma once

#include <vector>

namespace tdbg::diff::testdata {

inline const std::vector<int> kMlpStep = {
    0,  1,  2,  3,  4,  5,  6,  2,  7,  8,  9,  10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22,
    23, 24, 25, 24, 26, 27, 28, 29, 30, 31, 32, 33, 34, 24, 30, 35, 36, 37, 38, 39, 22, 40, 41, 42,
    43, 44, 45, 30, 46, 47, 33, 48, 49, 30, 50, 51, 0,  1,  2,  3,  52, 51, 51, 53, 47, 47, 54, 36,
    36, 55, 32, 32, 52, 51, 53, 47, 54, 36, 55, 32, 56, 57, 58, 43, 59, 60, 61, 27, 62, 63, 17, 64};

inline const std::vector<int> kMlpStepWithAbs = {
    65, 64, 66, 67, 0,  1,  2,  3,  4,  5,  6,  2,  7,  8,  9,  10, 68, 69, 70, 71, 66, 11, 12, 13,
    14, 72, 73, 74, 19, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 75, 22, 23, 24, 25, 24, 26, 27,
    28, 29, 30, 31, 32, 33, 34, 24, 30, 35, 36, 37, 38, 39, 22, 40, 41, 42, 43, 44, 45, 30, 46, 47,
    33, 48, 49, 30, 50, 51, 0,  1,  2,  3,  52, 51, 51, 53, 47, 47, 54, 36, 36, 55, 32, 32, 52, 51,
    53, 47, 54, 36, 55, 32, 56, 57, 58, 43, 59, 60, 61, 27, 62, 63, 17, 64};

}  // namespace tdbg::diff::testdata
