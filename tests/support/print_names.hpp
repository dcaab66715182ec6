// How GoogleTest prints the parameters of the parametrized suites: by name
// ("1f1b", "2 stages x 2 replicas"), so that ctest's listing and a failure
// say which case it is instead of "GetParam() = 56-byte object <...>".
// GoogleTest finds each PrintTo beside its type (argument-dependent lookup).
#pragma once

#include <ostream>

#include "pipeline/schedule.hpp"
#include "train/layout.hpp"

namespace distlab::pipeline {
inline void PrintTo(ScheduleKind kind, std::ostream* os) { *os << kind_name(kind); }
}  // namespace distlab::pipeline

namespace distlab::train {
inline void PrintTo(const Layout& layout, std::ostream* os) { *os << layout.text(); }
}  // namespace distlab::train
