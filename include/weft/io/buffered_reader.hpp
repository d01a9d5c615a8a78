#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <string_view>

#include "weft/core/result.hpp"
#include "weft/core/task.hpp"
#include "weft/io/error.hpp"
#include "weft/io/tcp_stream.hpp"

namespace weft {

/// Reads a tcp_stream through a buffer: delimited records (a line, an HTTP header block) with a
/// bound on their length, and exact sizes, with one read of the socket for many records.
///
/// Views: read_until and read_line return a view into the reader's buffer, valid until the next
/// call of any non-const member (which may move or grow the buffer). Copy what must live longer.
///
/// Errors (values): `io_errc::eof` when the peer closed before the record ended (the bytes that
/// came stay in buffered()); `io_errc::too_long` (equal to std::errc::message_size) when
/// `limit` bytes are buffered without the delimiter among them (nothing is consumed: the caller
/// usually answers 431 / closes); `operation_canceled`, and the stream's own errors. The buffer
/// grows to hold an unfinished record, to about twice `limit` at most.
///
/// Threading and lifetime: like one reader of tcp_stream: one task at a time uses it, from any
/// worker. It refers to the stream, which must outlive it; read the stream only through it
/// while it holds bytes (buffered() and consume() hand them over). Not movable.
///
///     weft::buffered_reader in(conn);
///     auto request_line = co_await in.read_line(8192);           // "GET / HTTP/1.1"
///     auto head = co_await in.read_until("\r\n\r\n", 16384);     // up to and with the blank line
class buffered_reader {
public:
    /// `capacity`: the buffer's first size (it grows for longer records).
    explicit buffered_reader(tcp_stream& stream, std::size_t capacity = 4096);
    buffered_reader(const buffered_reader&) = delete;
    auto operator=(const buffered_reader&) -> buffered_reader& = delete;
    ~buffered_reader();

    /// The next record: every byte up to and including the first `delim`, if it ends within
    /// `limit` bytes; reads the stream only when the buffer holds no such record yet.
    /// An empty `delim` is `invalid_argument`.
    [[nodiscard]] auto read_until(std::string_view delim, std::size_t limit)
        -> task<result<std::string_view>>;

    /// The next line, ended by LF or CRLF, without its ending. `limit` counts the ending too.
    ///
    ///     while (auto line = co_await in.read_line(1024)) { handle(*line); }
    [[nodiscard]] auto read_line(std::size_t limit) -> task<result<std::string_view>>;

    /// At least one byte, at most buf.size(): from the buffer when it holds any, else from the
    /// stream (directly into `buf` when it is at least as large as the buffer).
    [[nodiscard]] auto read_some(std::span<std::byte> buf) -> task<result<std::size_t>>;

    /// Exactly buf.size() bytes: the buffered ones first, then the stream's (eof if it ends
    /// first; what was read is then consumed).
    [[nodiscard]] auto read_exact(std::span<std::byte> buf) -> task<result<void>>;

    /// Reads once more from the stream into the buffer; the number of bytes added.
    [[nodiscard]] auto fill() -> task<result<std::size_t>>;

    /// The bytes read from the stream and not consumed yet (a body's start after its header
    /// block, a partial record after eof).
    [[nodiscard]] auto buffered() const noexcept -> std::string_view {
        return {data_.get() + begin_, end_ - begin_};
    }
    /// Drops the first `n` buffered bytes (n <= buffered().size()).
    void consume(std::size_t n) noexcept;

    [[nodiscard]] auto stream() noexcept -> tcp_stream& { return *stream_; }

private:
    // Invariant: begin_ <= end_ <= capacity_; [begin_, end_) is buffered().
    void make_room();
    tcp_stream* stream_;
    std::unique_ptr<char[]> data_;
    std::size_t capacity_;
    std::size_t begin_ = 0;
    std::size_t end_ = 0;
};

}  // namespace weft
