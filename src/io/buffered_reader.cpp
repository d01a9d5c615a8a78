#include "weft/io/buffered_reader.hpp"

#include <algorithm>
#include <cstring>
#include <system_error>

namespace weft {

buffered_reader::buffered_reader(tcp_stream& stream, std::size_t capacity)
    : stream_(&stream),
      data_(new char[std::max<std::size_t>(capacity, 64)]),
      capacity_(std::max<std::size_t>(capacity, 64)) {}

buffered_reader::~buffered_reader() = default;

void buffered_reader::consume(std::size_t n) noexcept { begin_ += std::min(n, end_ - begin_); }

// Free space at the end for the next read. The unconsumed bytes move to the front when that
// frees a quarter of the buffer or more, or when the end is reached (views handed out earlier
// are invalid by then); the buffer doubles only when it is full of unconsumed bytes, i.e. for a
// record that does not fit. read_until reads only while it holds fewer than `limit` bytes, so
// it never grows the buffer past twice its limit.
void buffered_reader::make_room() {
    const std::size_t held = end_ - begin_;
    if (held == 0) {
        begin_ = end_ = 0;
        return;
    }
    if (capacity_ - end_ >= capacity_ / 4) {
        return;
    }
    if (begin_ > 0 && (begin_ >= capacity_ / 4 || end_ == capacity_)) {
        std::memmove(data_.get(), data_.get() + begin_, held);
        begin_ = 0;
        end_ = held;
        return;
    }
    if (end_ == capacity_) {  // and begin_ == 0: full of one unfinished record
        const std::size_t bigger = capacity_ * 2;
        std::unique_ptr<char[]> grown(new char[bigger]);
        std::memcpy(grown.get(), data_.get(), held);
        data_ = std::move(grown);
        capacity_ = bigger;
    }
}

auto buffered_reader::fill() -> task<result<std::size_t>> {
    make_room();
    auto free = std::as_writable_bytes(std::span<char>(data_.get() + end_, capacity_ - end_));
    auto n = co_await stream_->read_some(free);
    if (!n) {
        co_return n.error();
    }
    end_ += *n;
    co_return *n;
}

auto buffered_reader::read_until(std::string_view delim, std::size_t limit)
    -> task<result<std::string_view>> {
    if (delim.empty()) {
        co_return std::errc::invalid_argument;
    }
    std::size_t from = 0;  // where the search resumes: earlier bytes cannot start the delimiter
    for (;;) {
        const std::string_view held = buffered();
        // The record, delimiter included, must end within `limit` bytes.
        const std::string_view window = held.substr(0, limit);
        if (const std::size_t pos = window.find(delim, from); pos != std::string_view::npos) {
            const std::string_view record = held.substr(0, pos + delim.size());
            begin_ += record.size();  // consumed; the bytes stay put until the next call
            co_return record;
        }
        if (held.size() >= limit) {
            co_return make_error_code(io_errc::too_long);
        }
        // A delimiter split across reads starts in the last delim.size() - 1 bytes.
        from = window.size() >= delim.size() ? window.size() - delim.size() + 1 : 0;
        // fill() may move the bytes to the front: `from` counts from the first held byte.
        auto n = co_await fill();
        if (!n) {
            co_return n.error();
        }
    }
}

auto buffered_reader::read_line(std::size_t limit) -> task<result<std::string_view>> {
    auto r = co_await read_until("\n", limit);
    if (!r) {
        co_return r.error();
    }
    std::string_view line = *r;
    line.remove_suffix(1);
    if (!line.empty() && line.back() == '\r') {
        line.remove_suffix(1);
    }
    co_return line;
}

auto buffered_reader::read_some(std::span<std::byte> buf) -> task<result<std::size_t>> {
    if (buf.empty()) {
        co_return std::size_t{0};
    }
    if (begin_ == end_) {
        if (buf.size() >= capacity_) {
            co_return co_await stream_->read_some(buf);  // large: no copy through the buffer
        }
        auto n = co_await fill();
        if (!n) {
            co_return n.error();
        }
    }
    const std::size_t n = std::min(buf.size(), end_ - begin_);
    std::memcpy(buf.data(), data_.get() + begin_, n);
    begin_ += n;
    co_return n;
}

auto buffered_reader::read_exact(std::span<std::byte> buf) -> task<result<void>> {
    const std::size_t from_buffer = std::min(buf.size(), end_ - begin_);
    std::memcpy(buf.data(), data_.get() + begin_, from_buffer);
    begin_ += from_buffer;
    if (from_buffer == buf.size()) {
        co_return result<void>{};
    }
    co_return co_await stream_->read_exact(buf.subspan(from_buffer));
}

}  // namespace weft
