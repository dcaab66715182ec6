// dump_on_signals(): the handler writes the signal's number to a pipe; a
// watcher thread reads it and dumps. Only write() is async-signal-safe
// among what a dump needs. Also a std::terminate handler: an exception
// nobody catches (gloo's I/O threads throw gloo::EnforceNotMet when a
// message is longer than the recv posted for it) dumps before the abort.
//
// Once the process has begun to exit (exit(), main returned), nothing is
// dumped any more: the recorders and the locks a dump takes are being
// destroyed, and the work's own end was dumped already if it failed.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <string>
#include <thread>

#include "flight/recorder.hpp"

namespace distlab::flight {
namespace {

int pipe_fds[2] = {-1, -1};
std::atomic<bool> exiting{false};
std::terminate_handler previous_terminate = nullptr;

void on_signal(int signal_number) {
  const int saved = errno;  // a handler must leave errno as it found it
  const unsigned char byte = static_cast<unsigned char>(signal_number);
  ssize_t ignored = write(pipe_fds[1], &byte, 1);
  (void)ignored;
  errno = saved;
}

void watch() {
  for (;;) {
    unsigned char byte = 0;
    const ssize_t n = read(pipe_fds[0], &byte, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    if (byte == SIGUSR1) {
      if (!exiting) dump_all("SIGUSR1");
      continue;
    }
    if (!exiting) dump_all("SIGTERM (stopped from outside, e.g. by the launcher after another rank failed)");
    // Die of SIGTERM as if it had never been caught: the launcher and the
    // shell see the same exit status as before.
    signal(SIGTERM, SIG_DFL);
    kill(getpid(), SIGTERM);
    return;
  }
}

// "gloo::EnforceNotMet: [enforce fail at ...] ..." for the exception being
// thrown, if any.
std::string uncaught() {
  const std::exception_ptr current = std::current_exception();
  if (!current) return "no exception";
  try {
    std::rethrow_exception(current);
  } catch (const std::exception& e) {
    const std::string what = e.what();
    return what.substr(0, what.find('\n'));
  } catch (...) {
  }
  return "an exception that is not a std::exception";
}

void on_terminate() {
  static std::atomic<bool> once{false};
  if (!exiting && !once.exchange(true)) dump_all("terminate (" + uncaught() + ")");
  if (previous_terminate != nullptr) previous_terminate();  // prints what was thrown, then aborts
  std::abort();
}

}  // namespace

void dump_on_signals() {
  static std::once_flag once;
  std::call_once(once, [] {
    // Registered after the recorders' statics exist (run_job makes its
    // recorder first), so it runs before they are destroyed.
    std::atexit([] { exiting = true; });
    previous_terminate = std::set_terminate(on_terminate);
    if (pipe2(pipe_fds, O_CLOEXEC) != 0) return;  // no pipe: no dumps on signals, nothing else changes
    struct sigaction action {};
    action.sa_handler = on_signal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    sigaction(SIGUSR1, &action, nullptr);
    sigaction(SIGTERM, &action, nullptr);
    std::thread(watch).detach();
  });
}

}  // namespace distlab::flight
