// What the diagnosis of each injected fault (faults.hpp) must say, checked
// alike for thread ranks (flight_test.cpp) and gloo processes under
// distlab-run (gloo_test.cpp): the first finding's cause, culprits,
// sequence number and operation, and the words that name them. The caller
// writes out how the diagnosis must name the other ranks ("ranks 0-2",
// "ranks 0, 1"), so the expected text is spelled out, not computed by the
// code under test. No LibTorch: the gloo tests link only libdistlab_base.
#pragma once

#include <string>
#include <vector>

#include "flight/why.hpp"

namespace distlab::flight_test {

bool contains(const std::string& text, const std::string& part);

// The first finding is `cause` about `op` #`seq`, blaming `culprits`; no
// file was refused.
void expect_first_finding(const flight::Diagnosis& d, const std::string& cause, const std::vector<int>& culprits,
                          uint64_t seq, const std::string& op);

// `others` are in all_reduce #4; the culprit never entered it.
void expect_skip(const flight::Diagnosis& d, int culprit, const std::string& others);
// The culprit called broadcast [16] at #4 where `others` called all_reduce.
void expect_order(const flight::Diagnosis& d, int culprit, const std::string& others);
// The culprit passed float32 [256] to all_reduce #4, `others` [1024].
void expect_shape(const flight::Diagnosis& d, int culprit, const std::string& others);
// The rank after the culprit (of `world_size`) waits in recv #2 from it
// (tag 0); the culprit's send to it has tag 1; its last operation was
// recv #2 from the rank before it.
void expect_p2p(const flight::Diagnosis& d, int culprit, int world_size);
// The culprit left the job while every other rank waits for it in
// all_reduce #4.
void expect_dead(const flight::Diagnosis& d, int culprit, const std::vector<int>& others);

}  // namespace distlab::flight_test
