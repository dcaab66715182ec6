// The DDP + Pipe tutorial's log lines (its printed output), with tokens/s added:
//
//   | epoch   1 |    10/   50 batches | lr 5.00 | ms/batch 778.97 | loss 43.31 | ppl 6432469059895903232.00 | tokens/s 900
//   -----------------------------------------------------------------------------------------
//   | end of epoch   1 | time: 40.08s | valid loss  0.80 | valid ppl     2.22
//   =========================================================================================
//   | End of training | test loss  0.33 | test ppl     1.39
//
// The trainer prefixes each with "[RANK n]: " as the tutorial's print_with_rank.
#pragma once

#include <cstdint>
#include <string>

namespace distlab::train {

std::string format_batch_line(int64_t epoch, int64_t batch, int64_t batches, double lr, double ms_per_batch,
                              double loss, double tokens_per_second);
std::string format_epoch_line(int64_t epoch, double seconds, double valid_loss);
std::string format_test_line(double test_loss);
std::string rule(char c);  // 89 of c, as the tutorial's '-' * 89

}  // namespace distlab::train
