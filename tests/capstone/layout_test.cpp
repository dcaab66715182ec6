// The capstone's layout in three dimensions (train/layout.hpp): where each
// rank sits for 2 stages x 2 replicas x 2 tensor ranks, worked by hand, and
// the groups make_groups() forms on 8 thread ranks, read back member by
// member; T = 1 keeps the two-dimensional layout rank for rank.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <mutex>
#include <set>
#include <vector>

#include "collectives/collectives.hpp"
#include "comm/threads_backend.hpp"
#include "train/layout.hpp"

namespace distlab::train {
namespace {

TEST(Layout3d, PlacesWorkedByHand) {
  const Layout l{2, 2, 2};
  EXPECT_EQ(l.world_size(), 8);
  EXPECT_EQ(l.text(), "2 stages x 2 replicas x 2 tensor ranks");
  // rank = (replica * P + stage) * T + tensor
  const int expected[8][3] = {{0, 0, 0}, {0, 0, 1}, {1, 0, 0}, {1, 0, 1}, {0, 1, 0}, {0, 1, 1}, {1, 1, 0}, {1, 1, 1}};
  for (int rank = 0; rank < 8; ++rank) {
    const Place p = place_of(rank, l);
    EXPECT_EQ(p.stage, expected[rank][0]) << rank;
    EXPECT_EQ(p.replica, expected[rank][1]) << rank;
    EXPECT_EQ(p.tensor, expected[rank][2]) << rank;
  }
  const Layout flat{2, 2};  // T = 1: rank = replica * P + stage, as before
  EXPECT_EQ(flat.text(), "2 stages x 2 replicas");
  for (int rank = 0; rank < 4; ++rank) {
    EXPECT_EQ(place_of(rank, flat).stage, rank % 2);
    EXPECT_EQ(place_of(rank, flat).replica, rank / 2);
    EXPECT_EQ(place_of(rank, flat).tensor, 0);
  }
  EXPECT_THROW(place_of(8, l), std::invalid_argument);
}

// The groups a stage's gradients average over and the expert groups that
// subdivide them, worked by hand from rank = ((replica * P + stage) * C +
// context) * T + tensor.
TEST(Layout3d, AveragingAndExpertGroupsWorkedByHand) {
  using Groups = std::vector<std::vector<int>>;
  // 1 stage x 2 replicas x 2 context ranks x 2 tensor ranks: rank = (replica * 2 + context) * 2 + tensor.
  const Layout four_d{1, 2, 2, 2};
  EXPECT_EQ(averaging_members(four_d), (Groups{{0, 2, 4, 6}, {1, 3, 5, 7}}));
  EXPECT_EQ(expert_members(four_d, 2), (Groups{{0, 2}, {4, 6}, {1, 3}, {5, 7}}));
  EXPECT_EQ(expert_copy_members(four_d, 2), (Groups{{0, 4}, {2, 6}, {1, 5}, {3, 7}}));
  // 2 x 2 x 2 x 2: the groups in (stage, tensor) order, members by replica * C + context.
  const Layout five_d{2, 2, 2, 2};
  EXPECT_EQ(averaging_members(five_d), (Groups{{0, 2, 8, 10}, {1, 3, 9, 11}, {4, 6, 12, 14}, {5, 7, 13, 15}}));
  EXPECT_EQ(expert_members(five_d, 2),
            (Groups{{0, 2}, {8, 10}, {1, 3}, {9, 11}, {4, 6}, {12, 14}, {5, 7}, {13, 15}}));
  EXPECT_EQ(expert_copy_members(five_d, 2),
            (Groups{{0, 8}, {2, 10}, {1, 9}, {3, 11}, {4, 12}, {6, 14}, {5, 13}, {7, 15}}));
  EXPECT_EQ(expert_members(five_d, 4), (Groups{{0, 2, 8, 10}, {1, 3, 9, 11}, {4, 6, 12, 14}, {5, 7, 13, 15}}));
  // 2 stages x 4 replicas, C = T = 1: the data groups, in blocks of 2.
  const Layout two_d{2, 4};
  EXPECT_EQ(averaging_members(two_d), (Groups{{0, 2, 4, 6}, {1, 3, 5, 7}}));
  EXPECT_EQ(expert_copy_members(two_d, 2), (Groups{{0, 4}, {2, 6}, {1, 5}, {3, 7}}));
  const Place p = place_of(14, five_d);  // replica 1, stage 1, context 1, tensor 0
  EXPECT_EQ(averaging_place(p, five_d).group, 2);
  EXPECT_EQ(averaging_place(p, five_d).rank, 3);
  EXPECT_EQ(expert_place(3, 2).block, 1);
  EXPECT_EQ(expert_place(3, 2).copy, 1);
}

// Each group's members as world ranks, gathered inside the group.
std::set<int> members(comm::Communicator& group) {
  const at::Tensor mine = at::full({1}, group.world_rank(), at::kLong);
  at::Tensor every = at::empty({group.size()}, at::kLong);
  collectives::all_gather(group, mine, every);
  std::set<int> out;
  for (int64_t i = 0; i < every.numel(); ++i) out.insert(static_cast<int>(every[i].item<int64_t>()));
  return out;
}

TEST(Layout3d, GroupsOnEightThreadRanks) {
  std::mutex mutex;
  std::vector<std::set<int>> pipeline(8), replica(8), tensor(8);
  comm::run_thread_ranks(8, [&](comm::Communicator& world) {
    Groups g = make_groups(world, Layout{2, 2, 2});
    const auto p = members(*g.pipeline), r = members(*g.replica), t = members(*g.tensor);
    EXPECT_EQ(g.pipeline->rank(), g.place.stage);
    EXPECT_EQ(g.replica->rank(), g.place.replica);
    EXPECT_EQ(g.tensor->rank(), g.place.tensor);
    std::lock_guard<std::mutex> lock(mutex);
    pipeline[world.rank()] = p;
    replica[world.rank()] = r;
    tensor[world.rank()] = t;
  });
  // Tensor rank k of a stage: its stage's T ranks; the same k of the next
  // stage (pipeline); the same k of the same stage in the other replica.
  EXPECT_EQ(tensor[0], (std::set<int>{0, 1}));
  EXPECT_EQ(tensor[6], (std::set<int>{6, 7}));
  EXPECT_EQ(pipeline[0], (std::set<int>{0, 2}));
  EXPECT_EQ(pipeline[1], (std::set<int>{1, 3}));
  EXPECT_EQ(pipeline[5], (std::set<int>{5, 7}));
  EXPECT_EQ(replica[0], (std::set<int>{0, 4}));
  EXPECT_EQ(replica[3], (std::set<int>{3, 7}));
  for (int rank = 0; rank < 8; ++rank) {
    EXPECT_TRUE(tensor[rank].count(rank) && pipeline[rank].count(rank) && replica[rank].count(rank)) << rank;
    EXPECT_EQ(tensor[rank].size() * pipeline[rank].size() * replica[rank].size(), 8u) << rank;
  }
}

}  // namespace
}  // namespace distlab::train
