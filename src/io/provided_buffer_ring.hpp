#pragma once

// Private to weft::io: a worker's io_uring provided-buffer ring (buffer-select receives).

#include <liburing.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "weft/core/detail/spin_lock.hpp"
#include "weft/io/bytes.hpp"

namespace weft::detail {

/// Test hook: when set, counts the provided buffers out of their rings, process-wide: +1 when a
/// completion's buffer is taken (take), -1 when it is back in the ring (give_back) or, its ring
/// gone (orphan), freed with the pool. Zero once every received chunk has been released and each
/// ring has drained its returns (a runtime destroyed: always); a buffer that never comes back
/// keeps it raised. nullptr in production: one relaxed load per take and give_back, no atomic
/// read-modify-write per receive (the counter is an atomic because buffers are released on any
/// thread after their ring is orphaned).
inline std::atomic<std::atomic<std::int64_t>*> provided_buffers_out_for_test{nullptr};

/// A worker's provided-buffer ring: `count` buffers of `size` bytes that the kernel picks from
/// when a buffer-select receive completes, so a connection waiting for data holds no buffer (an
/// idle connection costs its task frame and socket, nothing more). A received buffer becomes a
/// weft::bytes; when the last reference goes (on any thread) the buffer returns to the ring: at
/// once on the owner's thread, else through a locked list the owner drains when it polls.
/// The pool is reference-counted (the reactor's reference plus one per buffer out), so bytes
/// may outlive the runtime: the memory goes when the last one does.
class provided_buffer_ring {
public:
    static constexpr unsigned count = 1024;
    static constexpr std::size_t size = 4096;
    static constexpr unsigned short group = 1;
    /// Buffers handed to the kernel at first, and per grow(): the ring hands buffers out in
    /// FIFO order, so every buffer in it gets touched (resident) soon; starting small keeps a
    /// worker's receive memory at its working set (512 KiB, not 4 MiB) until load needs more.
    static constexpr unsigned grow_by = 128;

    /// Owner thread. nullptr if the kernel refuses the ring (receive then reads into the heap).
    [[nodiscard]] static auto create(io_uring* ring) -> provided_buffer_ring*;
    /// Owner thread (a CQE with IORING_CQE_F_BUFFER): the received buffer `bid` with `len`
    /// bytes, as a bytes; it goes back to the ring when the last reference to it goes.
    [[nodiscard]] auto take(unsigned bid, std::size_t len) noexcept -> bytes;
    /// Owner thread: returns buffers released on other threads to the ring.
    void drain_returns() noexcept;
    /// Owner thread, when a receive found the ring empty (ENOBUFS): hands the kernel grow_by
    /// more buffers, up to count.
    void grow() noexcept;
    /// Owner thread, before the ring goes away: unregister; drop the reactor's reference.
    void orphan(io_uring* ring) noexcept;

private:
    struct slot : bytes_block {
        provided_buffer_ring* pool = nullptr;
        unsigned bid = 0;
    };
    provided_buffer_ring() = default;
    ~provided_buffer_ring();
    static void release(bytes_block* b) noexcept;
    void give_back(unsigned bid) noexcept;  // owner thread: `bid` back into the ring
    void unref() noexcept;

    io_uring_buf_ring* br_ = nullptr;
    std::byte* mem_ = nullptr;
    slot* slots_ = nullptr;
    unsigned added_ = 0;  // buffers given to the ring so far (owner only)
    std::thread::id owner_;
    std::atomic<bool> orphaned_{false};   // set under mu_ (see release)
    std::atomic<std::uint32_t> refs_{1};  // the reactor's + one per buffer out
    std::mutex mu_;
    std::vector<unsigned> returned_;            // guarded by mu_
    std::atomic<bool> returns_waiting_{false};  // set under mu_ with a push to returned_
};

}  // namespace weft::detail
