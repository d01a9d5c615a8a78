#include "kafka_producer.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <stdexcept>
#include <string>
#include <utility>

#include "weft/bus/envelope_codec.hpp"
#include "weft/bus/errc.hpp"
#include "weft/core/join_handle.hpp"
#include "weft/io/fd_wait.hpp"
#include "weft/io/reactor.hpp"

namespace weft::bus {

struct kafka_producer::state {
    state(std::shared_ptr<kafka_backend::connection> c, publish_sink& s)
        : conn(std::move(c)), sink(&s) {}
    state(const state&) = delete;
    auto operator=(const state&) -> state& = delete;
    ~state() {
        destroy_client();
        if (efd >= 0) {
            ::close(efd);
        }
    }

    std::shared_ptr<kafka_backend::connection> conn;
    publish_sink* sink;
    rd_kafka_t* rk = nullptr;
    rd_kafka_queue_t* queue = nullptr;  // the main queue: delivery reports
    int efd = -1;                       // eventfd: written by librdkafka, read by the drain task

    // Started and not yet handed to the sink. Incremented by start, decremented by the drain
    // task (or by start itself for an inline failure); the drain task ends once closed is set
    // and this is 0. seq_cst on both: a close() and the last decrement must not both miss each
    // other (the wake-up is the eventfd write in close(), after the store).
    std::atomic<std::uint32_t> outstanding{0};
    std::atomic<bool> closed{false};

    void wake() const noexcept {
        const std::uint64_t one = 1;
        [[maybe_unused]] const auto n = ::write(efd, &one, sizeof(one));
    }
    void fail_now(std::uint32_t slot, std::error_code ec) {
        outstanding.fetch_sub(1);
        sink->complete(slot, ec);
    }
    void destroy_client() noexcept {
        if (queue != nullptr) {
            rd_kafka_queue_destroy(queue);
            queue = nullptr;
        }
        if (rk != nullptr) {
            rd_kafka_destroy(rk);
            rk = nullptr;
        }
    }
    /// Hands every delivery report queued now to the sink; the number handed.
    auto drain_queue() -> std::uint64_t {
        std::uint64_t done = 0;
        while (rd_kafka_event_t* ev = rd_kafka_queue_poll(queue, 0)) {
            if (rd_kafka_event_type(ev) == RD_KAFKA_EVENT_DR) {
                while (const rd_kafka_message_t* m = rd_kafka_event_message_next(ev)) {
                    const auto slot =
                        static_cast<std::uint32_t>(reinterpret_cast<std::uintptr_t>(m->_private));
                    result<ack> outcome = kafka_error(m->err);
                    if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR) {
                        ack a;
                        a.stream = rd_kafka_topic_name(m->rkt);
                        a.partition = m->partition;
                        a.sequence = static_cast<std::uint64_t>(m->offset);
                        outcome = std::move(a);
                    }
                    outstanding.fetch_sub(1);
                    sink->complete(slot, std::move(outcome));
                    ++done;
                }
            }
            rd_kafka_event_destroy(ev);
        }
        return done;
    }
};

namespace {

auto drain(std::shared_ptr<kafka_producer::state> st) -> task<void> {
    for (;;) {
        auto r = co_await wait_readable(st->efd);
        if (!r) {
            co_return;  // the runtime is shutting down: the state's destructor ends the client
        }
        std::uint64_t count = 0;
        [[maybe_unused]] const auto n = ::read(st->efd, &count, sizeof(count));
        st->conn->wakes.fetch_add(1, std::memory_order_relaxed);
        const auto done = st->drain_queue();
        st->conn->acks.fetch_add(done, std::memory_order_relaxed);
        if (st->closed.load() && st->outstanding.load() == 0) {
            break;
        }
    }
    // Nothing in flight: destroying the client only joins librdkafka's threads, on the
    // backend's closer thread rather than a weft worker.
    auto conn = st->conn;
    conn->close_later([st = std::move(st)]() mutable {
        st->destroy_client();
        st.reset();
    });
}

}  // namespace

auto kafka_producer::make(std::shared_ptr<kafka_backend::connection> conn,
                          publish_sink& sink,
                          std::uint32_t max_pending) -> result<std::unique_ptr<backend_producer>> {
    try {
        (void)current_io_backend();  // the drain task needs a reactor on this runtime
    } catch (const std::logic_error&) {
        return std::make_error_code(std::errc::operation_not_supported);
    }
    auto st = std::make_shared<state>(conn, sink);
    st->efd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (st->efd < 0) {
        return std::error_code(errno, std::system_category());
    }
    const auto& o = conn->options;
    rd_kafka_conf_t* conf = nullptr;
    try {
        conf =
            kafka_conf(o, {{"enable.idempotence", "true"},
                           {"acks", "all"},
                           {"linger.ms", std::to_string(o.linger.count())},
                           {"partitioner", "murmur2_random"},
                           {"message.timeout.ms", std::to_string(o.publish_timeout.count())},
                           // Above the publisher's bound: a produce never finds the queue full.
                           {"queue.buffering.max.messages", std::to_string(max_pending * 2 + 1024)},
                           {"queue.buffering.max.kbytes", "1048576"}});
    } catch (const std::system_error& e) {
        return e.code();
    }
    rd_kafka_conf_set_events(conf, RD_KAFKA_EVENT_DR);
    char err[512];
    st->rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof(err));
    if (st->rk == nullptr) {
        rd_kafka_conf_destroy(conf);
        return make_error_code(bus_errc::broker_error);
    }
    st->queue = rd_kafka_queue_get_main(st->rk);
    const std::uint64_t one = 1;  // what librdkafka writes: an eventfd takes 8 bytes
    rd_kafka_queue_io_event_enable(st->queue, st->efd, &one, sizeof(one));
    spawn(drain(st)).detach();
    return std::unique_ptr<backend_producer>(new kafka_producer(std::move(st)));
}

void kafka_producer::start(envelope env, std::uint32_t slot) {
    state& st = *st_;
    st.outstanding.fetch_add(1);
    st.conn->ensure_topic_async(env.topic);
    const std::string bytes = encode(env);
    const std::string id = env.id.to_string();
    const rd_kafka_resp_err_t e = rd_kafka_producev(
        st.rk, RD_KAFKA_V_TOPIC(env.topic.c_str()),
        RD_KAFKA_V_KEY(env.key.empty() ? nullptr : env.key.data(), env.key.size()),
        RD_KAFKA_V_VALUE(const_cast<char*>(bytes.data()), bytes.size()),
        RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
        RD_KAFKA_V_HEADER("weft-id", id.data(), static_cast<ssize_t>(id.size())),
        RD_KAFKA_V_OPAQUE(reinterpret_cast<void*>(static_cast<std::uintptr_t>(slot))),
        RD_KAFKA_V_END);
    if (e != RD_KAFKA_RESP_ERR_NO_ERROR) {
        st.fail_now(slot, kafka_error(e));
    }
}

void kafka_producer::close() noexcept {
    st_->closed.store(true);
    st_->wake();  // the drain task checks whether it may end
}

kafka_producer::~kafka_producer() { close(); }

}  // namespace weft::bus
