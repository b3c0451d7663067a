#include "scripts/resp_command.hpp"

#include <cstdlib>
#include <vector>

#include <hiredis/hiredis.h>

namespace ratelimit {

std::string format_command(const std::string_view *argv, std::size_t argc)
{
    std::vector<const char *> data(argc);
    std::vector<size_t> lens(argc);

    for (std::size_t i = 0; i < argc; i++) {
        data[i] = argv[i].data();
        lens[i] = argv[i].size();
    }

    char *command = nullptr;
    long long len = redisFormatCommandArgv(&command, static_cast<int>(argc),
                                           data.data(), lens.data());

    if (len < 0) {
        return {};
    }

    std::string out(command, static_cast<size_t>(len));
    std::free(command);
    return out;
}

}  // namespace ratelimit
