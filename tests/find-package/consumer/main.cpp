// A user's program built against the installed weft.
#include <weft/weft.hpp>

auto twice(int v) -> weft::task<int> { co_return 2 * v; }

auto main() -> int {
    weft::runtime rt{{.workers = 2}};
    return rt.block_on(twice(21)) == 42 ? 0 : 1;
}
