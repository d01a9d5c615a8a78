#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string_view>
#include <system_error>

#include "weft/bus/backend.hpp"
#include "weft/bus/dead_letters.hpp"

namespace weft::bus {

struct memory_broker_options {
    /// Messages each topic keeps for groups that join later (a new group starts with them,
    /// as a JetStream consumer with DeliverAll does); the oldest go first.
    std::size_t retention = 65'536;
    /// Recent ids per topic remembered for de-duplication: a publish whose id is among them is
    /// acknowledged as a duplicate (the original's sequence) and not stored again. Costs 32
    /// bytes per id that arrives above every id before it (as message_id::generate's do, in a
    /// sorted FIFO: 2 MB for a topic that has seen the default window) and up to 96 per id that
    /// does not (a ring and an index table, grown by doubling as such ids arrive).
    std::size_t dedup_window = 65'536;
    /// Largest envelope accepted (topic, key, type, headers and payload bytes together).
    std::size_t max_message_bytes = 1 << 20;
};

/// The in-process broker: the embedded default for tests and single-process programs, with the
/// semantics of the networked backends (consumer groups, ack / nack / term, redelivery after
/// the ack timeout, dead letters, de-duplication by id). Nothing survives the process.
///
/// - A publish is stored, and acknowledged, inline in publisher's call (`sequence` = its
///   position in the topic, from 1), unless the broker is paused.
/// - `pause()` holds every publish unacknowledged and unstored (a lagging broker); `resume()`
///   stores and acknowledges them in the order they came. For tests of back-pressure and of
///   close with messages in flight.
/// - A group's clock runs in its members' next(): a delivery past its ack timeout (or a nack
///   delay that ends) is handed out again by the member that waits for it, and a waiting
///   member sleeps until the group's earliest deadline. With no member waiting nothing is due
///   to anyone, so nothing needs to run; a message whose last allowed delivery expired goes to
///   the dead letters when a member next asks.
/// - A member that closes gives its unsettled deliveries back to the group at once.
/// Any thread. Must outlive every publisher, subscriber and delivery made from it.
///
///     weft::bus::memory_broker broker;
///     weft::bus::publisher pub{broker};
///     weft::bus::subscriber sub{broker, {.ack_wait = 2s}};
class memory_broker final : public backend {
public:
    explicit memory_broker(memory_broker_options options = {});
    memory_broker(const memory_broker&) = delete;
    auto operator=(const memory_broker&) -> memory_broker& = delete;
    ~memory_broker() override;

    [[nodiscard]] auto name() const noexcept -> std::string_view override { return "memory"; }
    [[nodiscard]] auto features() const noexcept -> backend_features override;
    auto make_producer(publish_sink& sink, std::uint32_t max_pending)
        -> result<std::unique_ptr<backend_producer>> override;
    auto make_consumer(consumer_config config)
        -> task<result<std::shared_ptr<backend_consumer>>> override;

    void pause();
    void resume();
    /// A test hook (failure injection, not for production): `fault(env)` is called for every
    /// publish before it is stored, on the publishing thread; an error it returns fails that
    /// publish with the error, and nothing is stored. Empty (the default) removes the hook. The
    /// hook must not call the broker.
    void set_publish_fault(std::function<std::error_code(const envelope&)> fault);
    /// Test hooks for a broker that misbehaves (fault injection, not for production), on the
    /// clock of the runtime the consumers run on (weft::testing's test clock moves them):
    /// - drop_acks(n): the next `n` acks are answered ok and lost: each delivery stays unsettled
    ///   and comes back after its ack timeout.
    /// - delay_acks(d): every ack from now on answers ok at once and settles `d` later on the
    ///   runtime clock (0: at once again); one later than the ack timeout finds the delivery
    ///   redelivered and is lost. Needs a runtime worker (the late ack is a detached task).
    /// - duplicate_deliveries(n): the next `n` deliveries are handed out twice, the copy as
    ///   another delivery of the same message (attempt + 1), each to be settled on its own.
    void drop_acks(std::uint32_t n);
    void delay_acks(std::chrono::milliseconds d);
    void duplicate_deliveries(std::uint32_t n);
    /// go_away(): a broker that is down. Publishes fail with bus_errc::broker_unreachable and
    /// store nothing; ack, nack and in_progress fail with it too; members receive nothing.
    /// come_back(): it is up again, and, as a restarted broker that forgot its consumers,
    /// hands every delivery that was unsettled when it left out again (attempt + 1).
    void go_away();
    void come_back();
    /// Messages stored in `topic` so far (its last sequence); 0 for a topic never published to.
    [[nodiscard]] auto stored(std::string_view topic) const -> std::uint64_t;
    /// The dead letters of `dead_letter_topic` (as subscriber_options names it): those the
    /// topic retains (memory_broker_options::retention). `ref` is the stream sequence.
    /// Removing one takes it out of what the topic retains, so groups that join later do not
    /// get it; a group already on the dead-letter topic has been handed it. Requeue publishes
    /// the original envelope (same id, not taken for a repeat of it) to its topic.
    /// Keep the result no longer than the broker.
    [[nodiscard]] auto open_dead_letters(std::string dead_letter_topic)
        -> std::unique_ptr<dead_letters>;

    struct state;

private:
    std::unique_ptr<state> state_;
};

}  // namespace weft::bus
