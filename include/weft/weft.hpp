#pragma once

// Umbrella header: all of weft.
#include "weft/core/frame_allocator.hpp"
#include "weft/core/generator.hpp"
#include "weft/core/join_handle.hpp"
#include "weft/core/result.hpp"
#include "weft/core/scope.hpp"
#include "weft/core/stop.hpp"
#include "weft/core/sync_wait.hpp"
#include "weft/core/task.hpp"
#include "weft/core/when_all.hpp"
#include "weft/core/when_any.hpp"
#include "weft/sched/driver.hpp"
#include "weft/sched/runtime.hpp"
#include "weft/sched/spawn_blocking.hpp"
#include "weft/sched/timer.hpp"
#include "weft/sched/yield.hpp"
