#include "collectives/async.hpp"

#include <chrono>
#include <exception>

#include "collectives/collectives.hpp"
#include "flight/site.hpp"

namespace distlab::collectives {

using Clock = std::chrono::steady_clock;

// One submitted collective and what became of it.
struct AsyncJob {
  std::string what;
  std::function<void()> run;
  std::mutex mutex;
  std::condition_variable cv;
  bool started = false;
  bool done = false;
  Clock::time_point start_time;
  std::exception_ptr error;
};

namespace {

class AsyncWork : public comm::Work {
 public:
  AsyncWork(std::shared_ptr<AsyncJob> job, comm::Milliseconds timeout) : job_(std::move(job)), timeout_(timeout) {}

  // The collective itself gives up after the communicator's timeout on any
  // message, so a started job always ends. The extra deadline here is the
  // guard for a job that started and never returned (a backend bug, not a
  // peer): the caller is told which collective it waited for.
  void wait() override { wait_up_to(2 * timeout_ + std::chrono::seconds(10)); }

  void wait_up_to(comm::Milliseconds limit) override {
    std::unique_lock<std::mutex> lock(job_->mutex);
    while (!job_->done) {
      job_->cv.wait_for(lock, std::chrono::milliseconds(100));
      if (job_->started && !job_->done && Clock::now() - job_->start_time > limit)
        throw comm::TimeoutError(job_->what + " did not complete within " + std::to_string(limit.count()) +
                                 " ms on the communication thread");
    }
    if (job_->error) std::rethrow_exception(job_->error);
  }

  bool is_completed() override {
    std::lock_guard<std::mutex> lock(job_->mutex);
    return job_->done;
  }

 private:
  std::shared_ptr<AsyncJob> job_;
  comm::Milliseconds timeout_;
};

}  // namespace

CommThread::CommThread(comm::Communicator& comm) : comm_(comm), thread_([this] { loop(); }) {}

CommThread::~CommThread() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

comm::WorkPtr CommThread::submit(std::string what, std::function<void()> run) {
  auto job = std::make_shared<AsyncJob>();
  job->what = std::move(what);
  // The submitter's call site (flight/site.hpp) goes with the work to the
  // communication thread, so the flight recorder names the DDP bucket or
  // ZeRO unit that asked for the collective.
  job->run = [site = flight::current_site(), run = std::move(run)] {
    flight::Site here(site);
    run();
  };
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(job);
  }
  cv_.notify_all();
  return std::make_shared<AsyncWork>(job, comm_.timeout());
}

void CommThread::loop() {
  while (true) {
    std::shared_ptr<AsyncJob> job;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and nothing left to run
      job = queue_.front();
      queue_.pop_front();
    }
    {
      std::lock_guard<std::mutex> lock(job->mutex);
      job->started = true;
      job->start_time = Clock::now();
    }
    std::exception_ptr error;
    try {
      job->run();
    } catch (...) {
      error = std::current_exception();
    }
    {
      std::lock_guard<std::mutex> lock(job->mutex);
      job->done = true;
      job->error = error;
    }
    job->cv.notify_all();
  }
}

comm::WorkPtr all_reduce_async(CommThread& thread, at::Tensor tensor, comm::ReduceOp op, Algorithm algorithm,
                               int tag) {
  comm::Communicator& comm = thread.comm();
  return thread.submit("rank " + std::to_string(comm.world_rank()) + ": all_reduce (" + to_string(algorithm) + ")",
                       [&comm, tensor, op, algorithm, tag]() mutable { all_reduce(comm, tensor, op, algorithm, tag); });
}

}  // namespace distlab::collectives
