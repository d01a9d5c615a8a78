#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "weft/bus/envelope.hpp"
#include "weft/core/result.hpp"

namespace weft::bus {

/// One dead-lettered message as its store holds it.
/// - `ref`: names it to show, requeue and drop: the stream sequence (NATS, the memory broker),
///   `<partition>:<offset>` (Kafka), the row's seq (the outboxes' `<table>_dead`).
/// - `message`: the envelope as stored, its dead-letter headers included (a broker's: the
///   `weftdeadletterreason`, `weftoriginaltopic`, `weftoriginalgroup` and `weftdeliveries`
///   headers; an outbox's row: the envelope as it was staged).
/// - `reason`: why it was dead-lettered; `topic`: where requeue publishes it.
struct dead_letter {
    std::string ref{};
    envelope message{};
    std::string reason{};
    std::string topic{};
};

/// Inspects and repairs one store of dead letters: a broker's dead-letter topic or an outbox's
/// `<table>_dead` table. An operations API (the `weft-bus dead` tool is built on it): every
/// call blocks its thread on the store (call it from a tool, or through spawn_blocking).
/// - `list(limit)`: the first `limit` dead letters, oldest first.
/// - `show(ref)`: one of them; `std::errc::no_such_file_or_directory` when there is none.
/// - `requeue(ref)`: publishes it again to its topic, the envelope as it was before it
///   failed (same id, key, type, headers and payload; the dead-letter headers removed), then
///   removes it from the dead letters. A broker's requeue is a publish (the message is new to
///   every group, attempt 1); an outbox's puts the row back in the outbox, for its relay.
///   Not atomic on a broker: a crash between the two steps leaves it published and still
///   listed (requeue it again: consumers see the id twice, as after any redelivery).
/// - `drop(ref)`: removes it for good.
/// Errors are the store's (bus_errc::broker_unreachable, ...). One thread at a time.
class dead_letters {
public:
    dead_letters() = default;
    dead_letters(const dead_letters&) = delete;
    auto operator=(const dead_letters&) -> dead_letters& = delete;
    virtual ~dead_letters() = default;

    virtual auto list(std::size_t limit) -> result<std::vector<dead_letter>> = 0;
    virtual auto show(std::string_view ref) -> result<dead_letter> = 0;
    virtual auto requeue(std::string_view ref) -> result<void> = 0;
    virtual auto drop(std::string_view ref) -> result<void> = 0;
};

/// The envelope a broker's dead letter was before it failed: `dead` without the dead-letter
/// headers, its topic the `weftoriginaltopic` header (unchanged when there is none).
[[nodiscard]] auto original_of(const envelope& dead) -> envelope;

}  // namespace weft::bus
