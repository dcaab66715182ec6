// What the planner knows of a model and its batch: sizes only, no weights.
//
// The capstone's Transformer LM (models/transformer_lm.hpp) by its preset,
// trained on `batch` columns of `bptt` tokens per step (all replicas
// together), as lesson 11 runs it. Every prediction (memory_model.hpp,
// step_time.hpp) and the enumeration (enumerate.hpp) read these numbers;
// none builds a model.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "models/transformer_lm.hpp"
#include "train/plan.hpp"

namespace distlab::planner {

struct ModelShape {
  std::string preset = "cpu";     // the capstone's --preset
  models::TransformerLmOptions lm;  // the model as lesson 11 builds it: V, d, f, L, a, dropout, experts
  int64_t bptt = 35;              // s: tokens per column
  int64_t batch = 20;             // columns per step, all replicas together
  int64_t eval_batch = 10;        // the evaluation's columns (train/trainer.hpp)
  // The corpus's splits in tokens, which every rank batchifies as int64
  // (train/trainer.cpp's set_up); 0 when no corpus was read (--vocab alone).
  int64_t train_tokens = 0, valid_tokens = 0, test_tokens = 0;
};

// The capstone's preset `name` for a vocabulary of `vocab` words, with
// lesson 11's batch (20 columns of 35 tokens). Throws std::invalid_argument
// naming the presets for an unknown one.
ModelShape model_shape(const std::string& preset, int64_t vocab);

// One choice of the parallel dimensions: the plan's own options
// (train/plan.hpp: the layout and each dimension's options).
using Choice = train::PlanOptions;
// The plan of `choice` for `model`: the model's layers, heads, width,
// dropout, experts and batch as the plan checks them (m at most a
// replica's columns, as the trainer runs it).
train::ParallelPlan plan_of(const ModelShape& model, const Choice& choice);

// The tokens of each sequence one rank of a context group of `context`
// holds: the sequence padded to the zigzag layout's 2C chunks, as the
// capstone pads it (train/batches.hpp); the whole sequence for 1.
int64_t sequence_tokens(const ModelShape& model, int context);

// The columns each microbatch of replica 0 carries: ceil over the split
// of a replica's columns into m (the largest microbatch, what memory peaks on).
int64_t replica_columns(const ModelShape& model, int replicas);
int64_t microbatch_columns(const ModelShape& model, int replicas, int64_t microbatches);
// Every microbatch's columns, in order (the largest first).
std::vector<int64_t> microbatch_sizes(const ModelShape& model, int replicas, int64_t microbatches);

// The command line of lesson 11 that runs `choice`: on thread ranks on
// the CPU ("cpu"), or one process per GPU under distlab-run with NCCL
// ("cuda").
std::string capstone_command(const ModelShape& model, const Choice& choice, const std::string& device = "cpu");

// "2x2x1x2 1f1b m8 ddp none fp32": one line naming a choice, for tables.
std::string choice_name(const Choice& choice);

}  // namespace distlab::planner
