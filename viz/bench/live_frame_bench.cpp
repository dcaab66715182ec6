// live_frame_bench: the Trace panel's frame time while a running program
// streams its events into it, rendered headless, frame after frame for as
// long as the program runs.
//
//   build/bench/live_frame_bench -- build/lessons/lesson_11_capstone --preset tiny --epochs 2
//
// The program is started with DISTLAB_TRACE_LIVE pointing at the panel's
// listener (any DistLab program streams there). "ui" is the frame's own
// work, including taking in what arrived and, every few hundred
// milliseconds, re-sorting and re-stacking the grown trace; "render" is
// Mesa's OpenGL drawing it (llvmpipe on a machine without a GPU). A class
// watches comfortably at 30 frames per second or more.
#include <CLI/CLI.hpp>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <numeric>
#include <string>
#include <vector>

#include "app.hpp"
#include "headless.hpp"

namespace {

using namespace distlab::viz;
using Clock = std::chrono::steady_clock;

// Starts argv with `env` added to this process's environment; -1 on failure.
pid_t start(const std::vector<std::string>& argv, const std::string& env) {
  const pid_t pid = fork();
  if (pid != 0) return pid;
  putenv(const_cast<char*>(env.c_str()));
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  execvp(args[0], args.data());
  std::perror(argv[0].c_str());
  _exit(127);
}

double percentile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(static_cast<double>(v.size()) * q))];
}

}  // namespace

int main(int argc, char** argv) {
  int width = 1280, height = 720;
  std::vector<std::string> command;
  CLI::App cli{"Frame time of the Trace panel while a program streams its events live, rendered headless"};
  cli.add_option("--width", width, "Frame width")->check(CLI::Range(320, 8192))->capture_default_str();
  cli.add_option("--height", height, "Frame height")->check(CLI::Range(240, 8192))->capture_default_str();
  cli.add_option("command", command, "The program to run and its arguments (after --)")->required();
  CLI11_PARSE(cli, argc, argv);

  Options options;
  options.panel = "trace";
  App app(options);
  TracePanel& panel = app.trace_panel();
  panel.listen(0, "127.0.0.1");
  HeadlessRenderer renderer(width, height);
  setup_imgui(1.0f);

  const std::string env = "DISTLAB_TRACE_LIVE=127.0.0.1:" + std::to_string(panel.live()->port());
  const auto begin = Clock::now();
  const pid_t child = start(command, env);
  if (child < 0) {
    std::perror("fork");
    return 1;
  }
  std::vector<double> ui, total;
  int status = 0;
  bool running = true;
  while (running) {
    running = waitpid(child, &status, WNOHANG) == 0;
    const FrameTiming t = renderer.frame([&] { app.frame(); });
    ui.push_back(t.ui_ms);
    total.push_back(t.total_ms());
  }
  // What arrived after the last frame: one more, so the count is complete.
  usleep(300'000);
  renderer.frame([&] { app.frame(); });
  const double wall_s = std::chrono::duration<double>(Clock::now() - begin).count();
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);

  const double mean_ui = std::accumulate(ui.begin(), ui.end(), 0.0) / static_cast<double>(ui.size());
  const double mean = std::accumulate(total.begin(), total.end(), 0.0) / static_cast<double>(total.size());
  std::printf("# %dx%d, %s (exit %d), %.1f s\n", width, height, command.front().c_str(), code, wall_s);
  std::printf("%8s %8s %10s %9s %9s %9s %9s %9s\n", "frames", "fps", "events", "ui ms", "total ms", "median",
              "p95", "max");
  std::printf("%8zu %8.1f %10llu %9.2f %9.2f %9.2f %9.2f %9.2f\n", total.size(),
              static_cast<double>(total.size()) / wall_s, static_cast<unsigned long long>(panel.live()->total()),
              mean_ui, mean, percentile(total, 0.5), percentile(total, 0.95), percentile(total, 1.0));
  return code;
}
