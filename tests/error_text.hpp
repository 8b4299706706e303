// tests/error_text.hpp — the two checks every error test uses: the message of the
// kattn::error a call throws, and substring search. Light (no kattn header beyond error.hpp),
// so reader tests that include only the header under test stay quick to compile.
#pragma once

#include <string>

#include <kattn/core/error.hpp>

namespace kt {

/// The message of the kattn::error f() throws ("" if it returns; other exceptions propagate).
template <class F>
std::string error_text(F&& f) {
    try {
        f();
    } catch (const kattn::error& e) {
        return e.what();
    }
    return "";
}

inline bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace kt
