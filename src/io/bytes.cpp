#include "weft/io/bytes.hpp"

#include <cstdlib>
#include <cstring>
#include <new>

namespace weft {
namespace {
// A heap bytes: the block header, then the data.
void free_heap_block(detail::bytes_block* b) noexcept {
    b->~bytes_block();
    std::free(b);
}
}  // namespace

namespace detail {
auto make_heap_block(std::size_t capacity, std::byte*& data) -> bytes_block* {
    void* raw = std::malloc(sizeof(bytes_block) + capacity);
    if (raw == nullptr) {
        throw std::bad_alloc();
    }
    auto* block = ::new (raw) bytes_block;
    block->release = &free_heap_block;
    data = reinterpret_cast<std::byte*>(block + 1);
    return block;
}
}  // namespace detail

auto bytes::copy_of(std::span<const std::byte> data) -> bytes {
    std::byte* payload = nullptr;
    detail::bytes_block* block = detail::make_heap_block(data.size(), payload);
    if (!data.empty()) {
        std::memcpy(payload, data.data(), data.size());
    }
    return bytes(block, payload, data.size());
}

auto bytes::slice(std::size_t offset, std::size_t count) const -> bytes {
    if (offset > size_) {
        offset = size_;
    }
    if (count > size_ - offset) {
        count = size_ - offset;
    }
    bytes out(*this);
    out.data_ += offset;
    out.size_ = count;
    return out;
}

}  // namespace weft
