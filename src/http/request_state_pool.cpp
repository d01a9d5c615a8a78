#include <cstddef>
#include <string>
#include <vector>

#include "request_state.hpp"

namespace weft::http::detail {

namespace {

// The request states this thread keeps for reuse. A connection may take one on a thread and
// give it back on another (its task moved), so a thread's list may run dry (a new state is
// made) or fill up (the state is freed): at most cached_states_max are kept per thread.
constexpr std::size_t cached_states_max = 64;
constexpr std::size_t kept_buffer_max = 16 * 1024;  // larger carry/out buffers are released

struct request_state_cache {
    std::vector<request_state*> free;
    request_state_cache() { free.reserve(cached_states_max); }
    request_state_cache(const request_state_cache&) = delete;
    auto operator=(const request_state_cache&) -> request_state_cache& = delete;
    ~request_state_cache() {
        for (request_state* p : free) {
            delete p;
        }
    }
};
thread_local request_state_cache tl_states;

}  // namespace

auto take_request_state(const request_limits& limits) -> request_state* {
    request_state_cache& c = tl_states;
    if (c.free.empty()) {
        return new request_state(limits);
    }
    request_state* p = c.free.back();
    c.free.pop_back();
    p->parser.reset(limits);
    return p;
}

void give_back_request_state(request_state* p) noexcept {
    for (std::string& carry : p->carry) {
        carry.clear();
        if (carry.capacity() > kept_buffer_max) {
            carry.shrink_to_fit();
        }
    }
    p->out.clear();
    if (p->out.capacity() > kept_buffer_max) {
        p->out.release();
    }
    p->segs.clear();
    p->held.clear();
    p->head_block = bytes{};
    request_state_cache& c = tl_states;
    if (c.free.size() < cached_states_max) {
        c.free.push_back(p);  // within the capacity reserved: does not allocate
    } else {
        delete p;
    }
}

}  // namespace weft::http::detail
