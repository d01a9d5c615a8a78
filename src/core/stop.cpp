#include "weft/core/stop.hpp"

#include "weft/core/detail/spin_wait.hpp"

namespace weft {

auto stop_state::lock() noexcept -> std::uint32_t {
    std::uint32_t w = word_.load(std::memory_order_relaxed);
    detail::spin_wait backoff;
    for (;;) {
        if ((w & locked_bit) == 0 &&
            word_.compare_exchange_weak(w, w | locked_bit, std::memory_order_acquire,
                                        std::memory_order_relaxed)) {
            return w | locked_bit;
        }
        backoff.once();
        w = word_.load(std::memory_order_relaxed);
    }
}

void stop_state::unlock() noexcept {
    // A plain store, not an RMW (one locked instruction less per add/remove, which every wait of
    // a weft::sync primitive pays twice): while locked_bit is set only the holder writes word_
    // (other lockers' CAS fails without writing, request_stop sets its bit under the lock), so
    // the holder's relaxed load reads the current word. release publishes the list edits made
    // under the lock to the next locker (pairs with the acquire CAS in lock()).
    word_.store(word_.load(std::memory_order_relaxed) & ~locked_bit, std::memory_order_release);
}

auto stop_state::request_stop() noexcept -> bool {
    std::uint32_t w = lock();
    if ((w & requested_bit) != 0) {
        unlock();
        return false;
    }
    // Set the flag while holding the lock: try_add checks it under the same lock, so a node is
    // either added before the request (and invoked below) or refused.
    word_.fetch_or(requested_bit, std::memory_order_release);
    running_thread_ = std::this_thread::get_id();
    while (detail::stop_callback_node* n = head_) {
        head_ = n->next;
        if (head_ != nullptr) {
            head_->prev = nullptr;
        }
        n->prev = n->next = nullptr;
        running_ = n;
        bool removed = false;
        n->removed_during_call = &removed;
        unlock();
        n->fn(n);
        if (!removed) {
            n->removed_during_call = nullptr;
            // release: everything the callback did happens-before the remover's return.
            n->done.store(true, std::memory_order_release);
        }
        lock();
        running_ = nullptr;
    }
    unlock();
    return true;
}

auto stop_state::try_add(detail::stop_callback_node* n) noexcept -> bool {
    std::uint32_t w = lock();
    if ((w & requested_bit) != 0) {
        unlock();
        return false;
    }
    n->prev = nullptr;
    n->next = head_;
    if (head_ != nullptr) {
        head_->prev = n;
    }
    head_ = n;
    unlock();
    return true;
}

void stop_state::remove(detail::stop_callback_node* n) noexcept {
    lock();
    if (n->prev != nullptr || head_ == n) {
        if (n->prev != nullptr) {
            n->prev->next = n->next;
        } else {
            head_ = n->next;
        }
        if (n->next != nullptr) {
            n->next->prev = n->prev;
        }
        n->prev = n->next = nullptr;
        unlock();
        return;
    }
    const bool running_elsewhere = running_ == n && running_thread_ != std::this_thread::get_id();
    if (running_ == n && !running_elsewhere && n->removed_during_call != nullptr) {
        *n->removed_during_call = true;  // removing itself from inside its own callback
    }
    unlock();
    if (running_elsewhere) {
        while (!n->done.load(std::memory_order_acquire)) {
            std::this_thread::yield();
        }
    }
}

void linked_stop_state::on_parent_stop(detail::stop_callback_node* n) noexcept {
    static_cast<link_node*>(n)->self->request_stop();
}

}  // namespace weft
