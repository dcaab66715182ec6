#include "train/training_log.hpp"

#include <cmath>
#include <cstdio>

namespace distlab::train {

std::string format_batch_line(int64_t epoch, int64_t batch, int64_t batches, double lr, double ms_per_batch,
                              double loss, double tokens_per_second) {
  char line[256];
  std::snprintf(line, sizeof line,
                "| epoch %3lld | %5lld/%5lld batches | lr %02.2f | ms/batch %5.2f | loss %5.2f | ppl %8.2f | "
                "tokens/s %.0f",
                static_cast<long long>(epoch), static_cast<long long>(batch), static_cast<long long>(batches), lr,
                ms_per_batch, loss, std::exp(loss), tokens_per_second);
  return line;
}

std::string format_epoch_line(int64_t epoch, double seconds, double valid_loss) {
  char line[160];
  std::snprintf(line, sizeof line, "| end of epoch %3lld | time: %5.2fs | valid loss %5.2f | valid ppl %8.2f",
                static_cast<long long>(epoch), seconds, valid_loss, std::exp(valid_loss));
  return line;
}

std::string format_test_line(double test_loss) {
  char line[128];
  std::snprintf(line, sizeof line, "| End of training | test loss %5.2f | test ppl %8.2f", test_loss,
                std::exp(test_loss));
  return line;
}

std::string rule(char c) { return std::string(89, c); }

}  // namespace distlab::train
