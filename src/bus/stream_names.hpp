#pragma once

#include <mutex>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "weft/bus/ack.hpp"
#include "weft/core/detail/spin_lock.hpp"

namespace weft::bus {

/// A producer's stream names, made once per stream: `get(name)` returns the shared
/// stream_name for `name`, making it on first sight. Acks copy it (a reference count) instead
/// of allocating a std::string each. Any thread. The lock is held for one comparison when the
/// name is the last one asked for, a hash lookup otherwise; it allocates only for a new name
/// (once per stream). Names are kept for the producer's lifetime.
class stream_names {
public:
    auto get(std::string_view name) -> stream_name {
        std::lock_guard lock(mu_);
        // The last one first: a producer usually publishes to one stream for a while.
        if (last_ != nullptr && *last_ == name) {
            return *last_;
        }
        auto it = names_.find(name);
        if (it == names_.end()) {
            stream_name made{name};
            // The key views the shared string itself, which lives as long as the entry.
            it = names_.emplace(made.view(), std::move(made)).first;
        }
        last_ = &it->second;
        return it->second;
    }

private:
    weft::detail::spin_lock mu_;
    // guarded by mu_; node-based, so last_ stays valid across inserts
    std::unordered_map<std::string_view, stream_name> names_;
    const stream_name* last_ = nullptr;  // guarded by mu_
};

}  // namespace weft::bus
