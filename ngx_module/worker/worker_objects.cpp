#include "worker/worker_objects.hpp"

namespace ratelimit {

WorkerObjects &worker_objects() noexcept
{
    // One per process: a reload starts new processes.
    static WorkerObjects objects{};
    return objects;
}

}  // namespace ratelimit
