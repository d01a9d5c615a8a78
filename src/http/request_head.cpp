#include "weft/http/request_head.hpp"

#include "char_class.hpp"

namespace weft::http {

void request_head::clear() noexcept {
    // inline_ is left as it is: count_ says how much of it is valid.
    method_name_ = target_ = path_ = query_ = authority_ = host_ = {};
    framing_ = {};
    size_ = 0;
    count_ = 0;
    method_ = http::method::other;
    form_ = target_form::origin;
    version_minor_ = 1;
    has_query_ = keep_alive_ = expect_continue_ = false;
    more_.clear();
}

void request_head::add_field(piece name, piece value) {
    if (count_ < inline_fields) {
        inline_[count_] = {name, value};
    } else {
        more_.push_back({name, value});
    }
    ++count_;
}

auto request_head::find(std::string_view name) const noexcept -> std::optional<std::string_view> {
    for (std::size_t i = 0; i < count_; ++i) {
        const header_field f = field(i);
        if (detail::iequals(f.name, name)) {
            return f.value;
        }
    }
    return std::nullopt;
}

void request_head::value_iterator::skip() noexcept {
    const std::size_t n = h_->field_count();
    while (i_ < n && !detail::iequals(h_->field(i_).name, name_)) {
        ++i_;
    }
}

}  // namespace weft::http
