// A tiny program that consumes kattn the way users do: it includes the umbrella
// header only, and is built by tests/consumer/run.sh through three routes
// (Meson subproject, pkg-config, CMake find_package).
#include <kattn/kattn.hpp>

#include <cstdio>
#include <string>

int main() {
    try {
        kattn::detail::require(false, "q", "rank 4", 3);
    } catch (const kattn::error& e) {
        const std::string msg = e.what();
        if (msg.find("'q'") == std::string::npos || msg.find("rank 4") == std::string::npos) {
            std::fprintf(stderr, "unexpected kattn::error message: %s\n", msg.c_str());
            return 1;
        }
        std::printf("kattn %d.%d.%d consumer ok: %s\n", KATTN_VERSION_MAJOR, KATTN_VERSION_MINOR,
                    KATTN_VERSION_PATCH, msg.c_str());
        return 0;
    }
    std::fprintf(stderr, "kattn::detail::require(false, ...) did not throw\n");
    return 1;
}
