// The module's directives: the table nginx reads them by.
#pragma once

#include "conf/module_conf.hpp"

namespace ratelimit {

extern ngx_command_t commands[];

}  // namespace ratelimit
