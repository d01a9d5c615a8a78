#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include "weft/bus/dead_letters.hpp"
#include "weft/bus/wire_format.hpp"

namespace weft::bus {

struct nats_dead_letters_options {
    std::string url = "nats://127.0.0.1:4222";
    /// The dead-letter topic (subject), e.g. "orders.dead-letter".
    std::string topic{};
    /// The JetStream stream that holds it; empty: the stream whose subjects take `topic`,
    /// asked of the server.
    std::string stream{};
    /// How requeue puts the envelope on the wire (as nats_backend_options::wire).
    wire_options wire{};
    std::chrono::milliseconds timeout{5'000};
};

/// The dead letters of a NATS JetStream dead-letter topic (see dead_letters). `ref` is the
/// stream sequence. list reads the topic through an ephemeral consumer that acknowledges
/// nothing (the groups' consumers are untouched); drop deletes the message from the stream;
/// requeue publishes the original envelope to its topic with the Nats-Msg-Id
/// "<id>-requeue-<ref>" (the envelope's id unchanged: within the stream's duplicate window the
/// server would otherwise drop it as a repeat of the original), then deletes the dead letter.
/// Blocking (its own connection); the constructor throws std::system_error when the server
/// cannot be reached or no stream takes the topic.
class nats_dead_letters final : public dead_letters {
public:
    explicit nats_dead_letters(nats_dead_letters_options options);
    ~nats_dead_letters() override;

    auto list(std::size_t limit) -> result<std::vector<dead_letter>> override;
    auto show(std::string_view ref) -> result<dead_letter> override;
    auto requeue(std::string_view ref) -> result<void> override;
    auto drop(std::string_view ref) -> result<void> override;

private:
    struct state;
    std::unique_ptr<state> s_;
};

}  // namespace weft::bus
