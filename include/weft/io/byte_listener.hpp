#pragma once

#include <memory>

#include "weft/core/result.hpp"
#include "weft/core/task.hpp"
#include "weft/io/byte_stream.hpp"

namespace weft {

/// Where a server takes byte_streams from: the seam's counterpart of tcp_listener.
/// `accept()` follows tcp_listener::accept: a stopped task ends it with `operation_canceled`.
class byte_listener {
public:
    byte_listener() = default;
    byte_listener(const byte_listener&) = delete;
    auto operator=(const byte_listener&) -> byte_listener& = delete;
    virtual ~byte_listener() = default;

    [[nodiscard]] virtual auto accept() -> task<result<std::unique_ptr<byte_stream>>> = 0;
};

}  // namespace weft
