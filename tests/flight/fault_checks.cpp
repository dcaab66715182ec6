// The checks of fault_checks.hpp: the expected words written out here, from
// what faults.cpp injects, never taken from the analyzer under test.
#include "fault_checks.hpp"

#include <gtest/gtest.h>

#include "fault_numbers.hpp"

namespace distlab::flight_test {

namespace {
std::string rank(int r) { return "rank " + std::to_string(r); }
}  // namespace

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

void expect_first_finding(const flight::Diagnosis& d, const std::string& cause, const std::vector<int>& culprits,
                          uint64_t seq, const std::string& op) {
  const std::string text = flight::to_text(d);
  ASSERT_FALSE(d.findings.empty()) << text;
  const flight::Finding& f = d.findings.front();
  EXPECT_EQ(f.cause, cause) << text;
  EXPECT_EQ(f.culprits, culprits) << text;
  EXPECT_EQ(f.seq, seq) << text;
  EXPECT_EQ(f.op, op) << text;
  EXPECT_TRUE(d.refused.empty()) << text;
}

void expect_skip(const flight::Diagnosis& d, int culprit, const std::string& others) {
  expect_first_finding(d, "skip", {culprit}, kFaultSeq, "all_reduce");
  if (d.findings.empty()) return;
  const std::string& text = d.findings.front().text;
  EXPECT_TRUE(contains(text, others + " are in all_reduce #4 (flight test skip / step 3) of group world")) << text;
  EXPECT_TRUE(contains(text, rank(culprit) + " never entered it: its last operation in world was all_reduce #3 "
                                             "(flight test skip / step 2), completed at "))
      << text;
}

void expect_order(const flight::Diagnosis& d, int culprit, const std::string& others) {
  expect_first_finding(d, "order", {culprit}, kFaultSeq, "all_reduce");
  if (d.findings.empty()) return;
  const std::string& text = d.findings.front().text;
  EXPECT_TRUE(contains(text, "collective mismatch at #4 of group world: " + others +
                                 " all_reduce float32 [1024] (ring), " + rank(culprit) +
                                 " broadcast float32 [16] root 0 (tree)"))
      << text;
  EXPECT_TRUE(contains(text, "\n  " + rank(culprit) + " called ")) << text;
}

void expect_shape(const flight::Diagnosis& d, int culprit, const std::string& others) {
  expect_first_finding(d, "shape", {culprit}, kFaultSeq, "all_reduce");
  if (d.findings.empty()) return;
  const std::string& text = d.findings.front().text;
  EXPECT_TRUE(contains(text, others + " all_reduce float32 [1024] (ring), " + rank(culprit) +
                                 " all_reduce float32 [256] (ring)"))
      << text;
  EXPECT_TRUE(contains(text, rank(culprit) + " passed another dtype or shape to all_reduce #4 "
                                             "(flight test shape / step 3); every rank must pass the same"))
      << text;
}

void expect_p2p(const flight::Diagnosis& d, int culprit, int world_size) {
  const int waiting = (culprit + 1) % world_size;
  const int before = (culprit + world_size - 1) % world_size;
  const uint64_t last_round = kP2pRounds - 1;
  expect_first_finding(d, "p2p", {culprit}, last_round, "recv");
  if (d.findings.empty()) return;
  const flight::Finding& f = d.findings.front();
  EXPECT_EQ(f.waiting, std::vector<int>{waiting}) << f.text;
  EXPECT_TRUE(contains(f.text, rank(waiting) + " is in recv #2 from " + rank(culprit) +
                                   " (tag 0) (flight test p2p / step 3), "))
      << f.text;
  EXPECT_TRUE(contains(f.text, rank(culprit) + " never sent it: its last send to " + rank(waiting) +
                                   " with tag 0 was #1"))
      << f.text;
  const std::string mistagged = "send #0 to " + rank(waiting) + " (tag 1) (flight test p2p / step 3)";
  EXPECT_TRUE(contains(f.text, "\n  " + rank(culprit) + "'s last send to " + rank(waiting) + " has another tag: " +
                                   mistagged))
      << f.text;
  EXPECT_TRUE(contains(f.text, "\n  " + rank(culprit) + "'s last operation: recv #2 from " + rank(before) +
                                   " (tag 0) (flight test p2p / step 3), completed at "))
      << f.text;
}

void expect_dead(const flight::Diagnosis& d, int culprit, const std::vector<int>& others) {
  expect_first_finding(d, "dead", {culprit}, kFaultSeq, "all_reduce");
  if (d.findings.empty()) return;
  const flight::Finding& f = d.findings.front();
  EXPECT_EQ(f.waiting, others) << f.text;
  for (int r : others)
    EXPECT_TRUE(contains(f.text, "\n  " + rank(r) + " waits for it in all_reduce #4 of group world "
                                                    "(flight test dead / step 3), "))
        << f.text;
}

}  // namespace distlab::flight_test
