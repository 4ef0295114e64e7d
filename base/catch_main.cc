// The one Catch2 main shared by every unit-test executable in the tree.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
