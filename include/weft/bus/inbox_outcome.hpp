#pragma once

namespace weft::bus {

/// What an inbox's handle() did with a delivery: ran the handler and recorded the id
/// (`processed`), or found the id recorded already and only acknowledged it (`duplicate`).
enum class inbox_outcome { processed, duplicate };

}  // namespace weft::bus
