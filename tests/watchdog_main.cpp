#include "test_util.hpp"

// Installs the watchdog for every test of the binary this file is linked into.
namespace {
const bool installed = [] {
    ::testing::UnitTest::GetInstance()->listeners().Append(new weft::test::watchdog_listener);
    return true;
}();
}  // namespace
