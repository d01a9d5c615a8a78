#pragma once

#include <nats/nats.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "nats_connection.hpp"
#include "weft/bus/backend.hpp"
#include "weft/core/detail/spin_lock.hpp"

namespace weft::bus {

/// The NATS backend's side of one publisher.
///
/// The ack path, step by step:
///   1. start(env, slot) (a weft task): encodes env and appends it to the producer's incoming
///      list; whichever thread holds the send lock (taken only with try_lock by start, so a
///      worker never sleeps on it) records msg -> slot in `in_flight_` and hands the message
///      to js_PublishMsgAsync. That is a memory copy, never a wait, because both
///      ways cnats blocks its caller are kept out: its MaxPending (StallWait) is set above
///      max_pending, and a message is sent only while cnats's write buffer has room for it
///      (natsConnection_Buffered), else held in order until acks come back (step 3). Not
///      connected: held until it is (step 3 looks every 50 ms), failed with
///      broker_unreachable once publish_timeout has passed.
///   2. cnats's thread calls on_ack: takes the slot for msg from `in_flight_`, writes the
///      outcome into `outcomes_[slot]`, appends slot to `completed_`, and writes the eventfd
///      only if `completed_` was empty (the first of a batch).
///   3. The drain task (a weft task on the publisher's runtime) wakes from wait_readable(efd),
///      swaps `completed_` out, hands each outcome to the publisher's sink, then sends the
///      held messages the buffer has room for.
/// With nats_ack_path::handler_pool, steps 2 and 3 are instead: on_ack sends (slot, outcome)
/// into a channel of max_pending (never full) under `mu`; a fixed pool of ack-handler tasks
/// receives one at a time, hands it to the sink and, when messages are held, sends those the
/// buffer has room for. The drain task then only looks after the connection and the end.
/// Invariant: started - completed-by-drain == outstanding_ <= max_pending, and
/// |in_flight_| + |completed_| == outstanding_.
///
/// Lifetime: the state is shared by the producer and its drain task; close() lets the drain
/// task end once nothing is outstanding. The cnats context (and with it its ack thread's use of
/// the state) is destroyed with the state, after the last outcome arrived.
class nats_producer final : public backend_producer {
public:
    static auto make(std::shared_ptr<nats_backend::connection> conn,
                     publish_sink& sink,
                     std::uint32_t max_pending) -> result<std::unique_ptr<backend_producer>>;

    void start(envelope env, std::uint32_t slot) override;
    void close() noexcept override;
    ~nats_producer() override;

    struct state;
    explicit nats_producer(std::shared_ptr<state> s) noexcept : st_(std::move(s)) {}

private:
    std::shared_ptr<state> st_;
};

}  // namespace weft::bus
