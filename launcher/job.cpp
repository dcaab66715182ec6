#include "job.hpp"

#include <signal.h>

#include <cstdlib>

#include "attempt.hpp"
#include "flight/signal_pipe.hpp"
#include "network.hpp"

namespace distlab::launcher {
namespace {

// A reader that went away must not kill the launcher while workers run;
// writes then fail with EPIPE, which write_all ignores.
class SigpipeIgnored {
 public:
  SigpipeIgnored() {
    struct sigaction ignore {};
    ignore.sa_handler = SIG_IGN;
    ::sigaction(SIGPIPE, &ignore, &replaced_);
  }
  ~SigpipeIgnored() { ::sigaction(SIGPIPE, &replaced_, nullptr); }

 private:
  struct sigaction replaced_ {};
};

}  // namespace

int run_job(const LaunchOptions& options) {
  try {
    const char* path_var = std::getenv("PATH");
    std::string program = find_program(options.command.front(), path_var != nullptr ? path_var : "/usr/bin:/bin");
    check_host_resolves(options.master_addr);
    // Picked once: a restarted job meets at the same address as before.
    int port = options.master_port != 0 ? options.master_port : pick_free_port();
    // Signals and worker output in the one poll() loop of Attempt::run.
    flight::SignalPipe signals({SIGINT, SIGTERM, SIGHUP, SIGCHLD, SIGUSR1});
    SigpipeIgnored sigpipe;

    for (int restart = 0;; ++restart) {
      AttemptOutcome outcome = Attempt(options, program, restart, port, signals).run();
      switch (outcome.kind) {
        case AttemptOutcome::Kind::kSucceeded: return kExitOk;
        case AttemptOutcome::Kind::kInterrupted: return 128 + outcome.signal;
        case AttemptOutcome::Kind::kFailed: break;
      }
      if (restart >= options.max_restarts) {
        say("job failed: " + outcome.failure +
            (options.max_restarts > 0
                 ? "; no restarts left (--max-restarts " + std::to_string(options.max_restarts) + ")"
                 : ""));
        return kExitJobFailed;
      }
      say("restarting all workers (restart " + std::to_string(restart + 1) + " of " +
          std::to_string(options.max_restarts) + ")");
    }
  } catch (const LaunchError& e) {
    say(e.what());
    return kExitCannotRun;
  }
}

}  // namespace distlab::launcher
